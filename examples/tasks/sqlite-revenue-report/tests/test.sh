#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
[ -f /app/report.csv ] || fail "no report.csv"
expected=$(printf 'customer,total\nGrace,150.00\nAlan,42.50\nEdsger,42.50\nAda,12.25')
[ "$(cat /app/report.csv)" = "$expected" ] || fail "report.csv: $(cat /app/report.csv)"
echo PASS
echo 1 > /logs/verifier/reward.txt
