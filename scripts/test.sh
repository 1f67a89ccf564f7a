#!/usr/bin/env bash
# Installs what the tests need, builds everything, checks the lock annotations with clang
# (scripts/thread-safety.sh), runs the fuzz targets for a bounded time (scripts/fuzz.sh), and
# runs the whole suite with CTest.
# The output ends with CTest's summary (a binary whose tests all skipped is counted there as
# "Skipped", never "Passed"), then every test skipped inside a binary that otherwise passed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
for extra in scripts/test-deps.d/*.sh; do
  [ -e "$extra" ] && bash "$extra"
done
scripts/build.sh
status=0
# Clang's thread-safety analysis of the Abseil lock annotations (front end only, a few files).
scripts/thread-safety.sh || status=$?
# The parsers of outside input under libFuzzer, each for a bounded time (label `fuzz`).
scripts/fuzz.sh || status=$?
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --no-label-summary -j "$(nproc)" --timeout 900 || status=$?
# tests/testing/gtest_main.cc prints one FLOTILLA_PARTIAL_SKIP line per skipped test of a binary
# that passed; CTest keeps the output of every test in its log.
skips=$(grep -h '^FLOTILLA_PARTIAL_SKIP ' Testing/Temporary/LastTest.log 2>/dev/null || true)
if [ -n "$skips" ]; then
  echo "Tests skipped inside binaries that passed:"
  printf '%s\n' "$skips" | sed 's/^FLOTILLA_PARTIAL_SKIP /  /'
fi
exit "$status"
