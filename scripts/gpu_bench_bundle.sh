#!/usr/bin/env bash
# Stages what the GPU benchmarks and tests need on a machine that has only the NVIDIA driver
# and CUDA runtime: the stripped binaries, the non-system shared libraries they load, and
# run.sh, which runs the `gpu` tests (default and forced attention kernels), the engine
# benchmark (Flotilla's format and a Hugging Face qwen3_moe at 10 and 48 layers, with
# transformers' generate beside it) and the rollout benchmark on the CUDA backend, writing logs to $OUT (or ./out).
# Usage: scripts/gpu_bench_bundle.sh DEST   (after building with CUDA into ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: $0 DEST}
bins=(build/bench/flotilla_engine_bench build/bench/flotilla_rollout_bench build/tests/inference/inference_gpu_test)
mkdir -p "$dest/lib"
for b in "${bins[@]}"; do objcopy --strip-debug "$b" "$dest/$(basename "$b")"; done
# The rollout benchmark's samples run in sandboxes, started from the static zygote found next
# to the benchmark's binary.
objcopy --strip-debug build/cli/flotilla-zygote "$dest/flotilla-zygote"
cp bench/hf_generate_torch.py "$dest/"
# Everything ldd resolves except the C/C++ runtime and the CUDA libraries (the target has those).
ldd "${bins[@]}" | awk '/=>/ {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libz|ld-linux[^/]*|libcuda[^/]*|libcublas[^/]*|libcudart[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
cublas=$(find /usr/local /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/lib${cublas:+:$(dirname "$cublas")}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
# ATTN_MODES (default "default gqa head": the default kernel, then each forced one) and
# SKIP_ENGINE=1 shorten a run.
for m in ${ATTN_MODES:-default gqa head}; do
  mode=${m#default}
  FLOTILLA_CUDA_ATTN=$mode ./inference_gpu_test > "$OUT/gpu_test${mode:+_$mode}.log" 2>&1
  echo "gpu tests (attention mode '${mode:-default}'): $(grep -E 'PASSED|FAILED' "$OUT/gpu_test${mode:+_$mode}.log" | tail -1)"
done
# The MoE routing through the separate kernels (the fused routing's fallback).
FLOTILLA_CUDA_ROUTE=separate ./inference_gpu_test > "$OUT/gpu_test_route_separate.log" 2>&1
echo "gpu tests (routing 'separate'): $(grep -E 'PASSED|FAILED' "$OUT/gpu_test_route_separate.log" | tail -1)"
[ -n "$SKIP_ENGINE" ] || FLOTILLA_ENGINE_PROFILE=1 ./flotilla_engine_bench --gpu-only 2>&1 | tee "$OUT/engine.log" | grep -E '^engine\.|rows=(1|64|256) '
# A Qwen3-30B-A3B-shaped Hugging Face qwen3_moe (10 layers, Qwen3's vocabulary): the CUDA
# backend's decode step, then transformers' generate on the same shape.
[ -n "$SKIP_ENGINE" ] || ./flotilla_engine_bench --gpu-hf 10 | tee "$OUT/hf_engine.log"
[ -n "$SKIP_ENGINE" ] || python3 hf_generate_torch.py 10 32 32 64 256 2>&1 | tee "$OUT/hf_generate.log" | grep '^torch\.'
# The full 48 layers of Qwen3-30B-A3B (the decode step and the 32k prefill), then transformers.
[ -n "$SKIP_ENGINE" ] || ./flotilla_engine_bench --gpu-hf 48 | tee "$OUT/hf_engine48.log"
[ -n "$SKIP_ENGINE" ] || python3 hf_generate_torch.py 48 32 32 256 2>&1 | tee "$OUT/hf_generate48.log" | grep '^torch\.'
# 32 steps: a run's ramp (its first batch) and drain (its last groups' long samples) cost the
# asynchronous mode about three steady steps together, a quarter of its time over 8 steps.
FLOTILLA_ENGINE_PROFILE=1 ./flotilla_rollout_bench --backend cuda --steps "${STEPS:-32}" --threads 0 \
  > "$OUT/rollout.log" 2> "$OUT/rollout_err.log"
cat "$OUT/rollout.log"
RUN
chmod +x "$dest/run.sh"
du -sh "$dest"
