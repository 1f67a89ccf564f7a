#!/usr/bin/env bash
# The official OpenAI and Anthropic npm clients that drive the worker's wire-API tests,
# installed from the npm registry into var/npm (ignored by git). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nodejs npm
fi
want=(openai@6.49.0 @anthropic-ai/sdk@1.14.0)
dir=var/npm
if [ ! -f "$dir/node_modules/openai/package.json" ] || [ ! -f "$dir/node_modules/@anthropic-ai/sdk/package.json" ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${want[@]}"
fi

# A real agent CLI for the worker's external-scaffold test: the Pi coding agent (plain Node.js,
# works offline against a custom OpenAI-compatible provider).
agent_dir=var/agents/pi
if [ ! -f "$agent_dir/node_modules/@mariozechner/pi-coding-agent/package.json" ]; then
  mkdir -p "$agent_dir"
  npm install --prefix "$agent_dir" --no-audit --no-fund --loglevel=error @mariozechner/pi-coding-agent@0.73.1
fi
