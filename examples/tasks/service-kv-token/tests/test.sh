#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
[ -f /app/token.txt ] || fail "no token.txt"
want=$(python3 -c 'import json; d = json.load(open("/var/lib/kv/data.json")); print([v for k, v in d.items() if k.startswith("token-")][0])')
[ "$(tr -d '[:space:]' < /app/token.txt)" = "$want" ] || fail "token.txt does not hold the token"
grep -q '^GET token-' /var/log/kv-access.log 2>/dev/null || fail "the service was never asked for the token"
echo PASS
echo 1 > /logs/verifier/reward.txt
