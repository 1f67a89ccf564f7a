#!/usr/bin/env bash
# Installs, builds, and runs the main job: an agentic RL experiment (multi-turn `mini` episodes,
# a sandbox per sample) on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/cli/flotilla run examples/agentic-grpo/experiment.yaml
