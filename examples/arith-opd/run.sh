#!/usr/bin/env bash
# On-policy distillation from per-sub-domain teachers, end to end:
#   1. each teacher is trained by the real trainer with SFT on its own sub-domain's data, which
#      the experiment's bridge serves (`flotilla bridge serve`; no student rollouts yet);
#   2. the student is distilled (`flotilla run`, loss opd): the engine's Score API scores each
#      student sample with the teacher mapped to its dataset, over the full vocabulary, and the
#      trainer minimises the per-token reverse KL.
# Ends with flotilla run's summary line. Usage (after scripts/build.sh):
#   examples/arith-opd/run.sh [EXPERIMENT.yaml]      TEACHER_STEPS=300 per teacher and sub-domain
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
experiment=${1:-$root/examples/arith-opd/experiment.yaml}
bin=${FLOTILLA_BINARY_DIR:-$root/build}
flotilla=$bin/cli/flotilla
work=$(mktemp -d)
bridge=
cleanup() {
  if [ -n "$bridge" ]; then kill "$bridge" 2>/dev/null || true; wait "$bridge" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"$flotilla" bridge serve "$experiment" --listen 127.0.0.1:0 >"$work/bridge.log" 2>&1 &
bridge=$!
for _ in $(seq 1200); do
  grep -q "listening on" "$work/bridge.log" && break
  if ! kill -0 "$bridge" 2>/dev/null; then cat "$work/bridge.log" >&2; exit 1; fi
  sleep 0.1
done
address=$(sed -n 's/.*listening on //p' "$work/bridge.log" | head -n 1)
[ -n "$address" ] || { echo "run.sh: the bridge did not start" >&2; cat "$work/bridge.log" >&2; exit 1; }
echo "run.sh: training the teachers against the bridge at $address"
PYTHONPATH=$root/trainer_bridge/python FLOTILLA_PROTO_PY=$bin/trainer_bridge/python PYTHONUNBUFFERED=1 \
  /usr/bin/python3 -m flotilla_trainer.train --bridge "$address" --out "$work/weights" --loss opd \
  --teachers-only --retrain-teachers --teacher-steps "${TEACHER_STEPS:-300}"
kill "$bridge"
wait "$bridge" || true
bridge=
echo "run.sh: distilling the student"
"$flotilla" run --fresh "$experiment"
