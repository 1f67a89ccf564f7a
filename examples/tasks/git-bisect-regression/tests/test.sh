#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
cd /app/repo || fail "no repo"
[ -f /app/first_bad.txt ] || fail "no /app/first_bad.txt"
got=$(tr -d '[:space:]' < /app/first_bad.txt)
truth=""
for c in $(git rev-list --reverse main); do
  if [ "$(git show "$c:calc.sh" | sh -s add 7 3)" != "10" ]; then truth=$c; break; fi
done
[ -n "$truth" ] || fail "history has no bad commit"
[ "$got" = "$truth" ] || fail "expected $truth, got $got"
echo PASS
echo 1 > /logs/verifier/reward.txt
