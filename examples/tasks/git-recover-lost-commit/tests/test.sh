#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
cd /app/repo || fail "no repo"
git rev-parse -q --verify refs/heads/recovered >/dev/null || fail "no branch recovered"
[ "$(git log -1 --format=%s recovered)" = "notes for launch" ] || fail "recovered is not the lost commit"
[ "$(git show recovered:notes.txt)" = "launch-code: 7421" ] || fail "notes.txt differs"
[ "$(git log -1 --format=%s main)" = "v2" ] || fail "main moved"
echo PASS
echo 1 > /logs/verifier/reward.txt
