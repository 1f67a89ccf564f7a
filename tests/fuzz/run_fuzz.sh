#!/bin/sh
# run_fuzz.sh BINARY SEED_DIR WORK_DIR SECONDS: one bounded libFuzzer run. New inputs go to
# WORK_DIR/corpus (the seed folder in the repository is only read); a crash leaves its input
# in WORK_DIR/artifacts and fails the test: copy it into the seed folder as a regression input.
# The mutation seed is fixed (FLOTILLA_FUZZ_SEED, default 1) so a bounded CI run explores the
# same way every time and its outcome is the code's, not the dice's; long exploratory runs set
# their own seed.
set -eu
bin=$1 seeds=$2 work=$3 seconds=$4
mkdir -p "$work/corpus" "$work/artifacts"
exec "$bin" -seed="${FLOTILLA_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds"
