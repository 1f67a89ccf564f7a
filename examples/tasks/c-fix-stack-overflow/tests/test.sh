#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
cd /app/wordlen || fail "no /app/wordlen"
make -B >/tmp/make.log 2>&1 || fail "make failed: $(tail -5 /tmp/make.log)"
[ "$(printf 'a bb ccc\n' | ./wordlen)" = "longest 3" ] || fail "short words"
long=$(head -c 5000 /dev/zero | tr '\0' x)
out=$(printf 'hi %s there\n' "$long" | ./wordlen 2>&1)
[ "$out" = "longest 5000" ] || fail "5000-character word: $out"
long=$(head -c 100000 /dev/zero | tr '\0' y)
out=$(printf '%s\n' "$long" | ./wordlen 2>&1)
[ "$out" = "longest 100000" ] || fail "100000-character word: ${out:0:80}"
echo PASS
echo 1 > /logs/verifier/reward.txt
