#!/usr/bin/env bash
# Configures and builds Flotilla into ./build (warnings are errors).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# ccache (when installed) shares results between checkouts of the tree: paths under the
# checkout are hashed relative to it, and the working directory is left out of the hash.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLOTILLA_WERROR=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
