#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
[ "$(stat -c '%U %a' /quarantine 2>/dev/null)" = "root 700" ] || fail "/quarantine: $(stat -c '%U %a' /quarantine 2>&1)"
[ -z "$(find /data -user mallory -type f)" ] || fail "mallory's files left in /data"
for f in tmp/dropper.sh:750 reports/2024/summary.txt:644 notes.txt:644; do
  p=/quarantine/${f%%:*}
  [ "$(stat -c '%U %a' "$p" 2>/dev/null)" = "mallory ${f##*:}" ] || fail "$p: $(stat -c '%U %a' "$p" 2>&1)"
done
[ "$(cat /quarantine/tmp/dropper.sh)" = "drop" ] || fail "dropper content"
[ "$(stat -c %U /data/reports/q1.txt)" = "eve" ] || fail "eve's file moved"
[ "$(stat -c %U /data/reports/2024/budget.txt)" = "trent" ] || fail "trent's file moved"
echo PASS
echo 1 > /logs/verifier/reward.txt
