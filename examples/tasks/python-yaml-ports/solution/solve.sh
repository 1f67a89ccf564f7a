#!/bin/bash
set -e
python3 - <<'EOF'
import json, yaml
doc = yaml.safe_load(open("/app/services.yaml"))
out = {s["name"]: int(s["port"]) for s in doc["services"] if s.get("enabled")}
json.dump(out, open("/app/ports.json", "w"), indent=2)
EOF
