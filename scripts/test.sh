#!/usr/bin/env bash
# Installs what the tests need, builds everything, and runs the whole suite with CTest.
# The output ends with CTest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
for extra in scripts/test-deps.d/*.sh; do
  [ -e "$extra" ] && bash "$extra"
done
scripts/build.sh
cd "${BUILD_DIR:-build}"
exec ctest --output-on-failure --no-label-summary -j "$(nproc)" --timeout 900
