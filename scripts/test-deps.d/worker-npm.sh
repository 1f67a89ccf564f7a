#!/usr/bin/env bash
# The official OpenAI and Anthropic npm clients that drive the worker's wire-API tests (var/npm),
# and a real agent CLI for the worker's external-scaffold test: the Pi coding agent (plain
# Node.js, works offline against a custom OpenAI-compatible provider; var/agents/pi). Both sets
# are locked under scripts/npm/. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/npm/install.sh npm-clients var/npm
scripts/npm/install.sh pi var/agents/pi
