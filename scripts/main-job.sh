#!/usr/bin/env bash
# Installs, builds, and runs the main job: an RL experiment on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/cli/flotilla run examples/arith-grpo/experiment.yaml
