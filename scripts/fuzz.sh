#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) into build-fuzz, a build
# that compiles only the parsers they fuzz, and runs each target for FLOTILLA_FUZZ_SECONDS
# (default 15) through CTest's label `fuzz`. A crash fails its test and leaves the input under
# build-fuzz/tests/fuzz/fuzz-work/<target>/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
# ccache (when installed) shares results between checkouts of the tree: paths under the
# checkout are hashed relative to it, and the working directory is left out of the hash.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B "$FUZZ_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DFLOTILLA_FUZZ=ON -DFLOTILLA_WERROR=ON -DFLOTILLA_FUZZ_SECONDS="${FLOTILLA_FUZZ_SECONDS:-15}" >/dev/null
cmake --build "$FUZZ_DIR" -j "${JOBS:-$(nproc)}"
cd "$FUZZ_DIR"
exec ctest -L fuzz --output-on-failure --no-label-summary -j "$(nproc)"
