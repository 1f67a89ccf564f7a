#!/usr/bin/env bash
# Installs one locked npm set: scripts/npm/SET/{package.json,package-lock.json} into DEST with
# `npm ci`, so a clean machine gets exactly the versions the tests were written against (a fresh
# resolution can pick a dependency the registry lists but cannot serve). Skips the install when
# DEST already holds this very lock. Usage: scripts/npm/install.sh SET DEST
set -euo pipefail
cd "$(dirname "$0")/../.."
set_name="$1"
dest="$2"
src="scripts/npm/$set_name"
if [ ! -f "$src/package.json" ] || [ ! -f "$src/package-lock.json" ]; then
  echo "npm/install.sh: no locked set '$set_name' (want $src/package.json and package-lock.json)" >&2
  exit 2
fi
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nodejs npm
fi
if [ -d "$dest/node_modules" ] && cmp -s "$src/package-lock.json" "$dest/node_modules/.flotilla-lock"; then
  exit 0
fi
mkdir -p "$dest"
cp "$src/package.json" "$src/package-lock.json" "$dest/"
npm ci --prefix "$dest" --no-audit --no-fund --loglevel=error
cp "$src/package-lock.json" "$dest/node_modules/.flotilla-lock"
