#!/bin/bash
# Writes 1 to /logs/verifier/reward.txt when every check passes, else 0.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
fail() { echo "FAIL: $*"; exit 0; }
[ -f /app/ports.json ] || fail "no ports.json"
python3 - <<'EOF' || fail "ports.json does not match"
import json, sys
got = json.load(open("/app/ports.json"))
want = {"api": 8080, "auth": 9001, "search": 9200}
sys.exit(0 if got == want else 1)
EOF
echo PASS
echo 1 > /logs/verifier/reward.txt
