#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
[ -f /app/decoded.txt ] || fail "no decoded.txt"
[ "$(cat /app/decoded.txt)" = "The ship sails at midnight" ] || fail "decoded.txt: $(cat /app/decoded.txt)"
echo PASS
echo 1 > /logs/verifier/reward.txt
