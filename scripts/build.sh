#!/usr/bin/env bash
# Configures and builds Flotilla into ./build (warnings are errors).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOTILLA_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
