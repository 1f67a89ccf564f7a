#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
cd /app/repo || fail "no repo"
[ "$(git rev-parse --abbrev-ref HEAD)" = "main" ] || fail "not on main"
parents=$(git log -1 --format=%P HEAD | wc -w)
[ "$parents" = "2" ] || fail "HEAD is not a merge commit"
git merge-base --is-ancestor feature HEAD || fail "feature is not merged"
expected=$(printf 'name=api\ntimeout=45\nlog=debug\nretries=5')
[ "$(cat settings.conf)" = "$expected" ] || fail "settings.conf: $(cat settings.conf)"
[ -z "$(git status --porcelain)" ] || fail "working tree not clean"
echo PASS
echo 1 > /logs/verifier/reward.txt
