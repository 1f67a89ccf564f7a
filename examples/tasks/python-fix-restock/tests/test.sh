#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
cd /tests && python3 -m unittest -q test_stock 2>&1 | tail -20
[ "${PIPESTATUS[0]}" = "0" ] || fail "unit tests failed"
echo PASS
echo 1 > /logs/verifier/reward.txt
