#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
cd /app/calc || fail "no /app/calc"
sha256sum -c /tests/sources.sha256 >/dev/null 2>&1 || fail "C sources were changed"
make clean >/dev/null 2>&1
make >/tmp/make.log 2>&1 || fail "make failed: $(tail -5 /tmp/make.log)"
[ "$(./calc 3 4)" = "5.000" ] || fail "./calc 3 4 printed $(./calc 3 4)"
[ "$(./calc 5 12)" = "13.000" ] || fail "./calc 5 12 printed $(./calc 5 12)"
echo PASS
echo 1 > /logs/verifier/reward.txt
