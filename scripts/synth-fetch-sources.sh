#!/bin/bash
# Fetches Debian source packages for `flotilla synth` into a folder, offline from the
# machine's own apt configuration: a deb-src entry is derived from the configured deb entries
# (deb822 *.sources files or one-line sources.list), then `apt-get source` unpacks each package.
#
#   scripts/synth-fetch-sources.sh OUT_DIR NAME...      (as root)
#
# OUT_DIR/NAME is then a link to the unpacked tree (NAME-VERSION/) and OUT_DIR/NAME.version
# holds the version apt chose. Exit status: 0 when every package came, 1 otherwise.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OUT_DIR NAME..." >&2
  exit 2
fi
out=$1; shift
mkdir -p "$out"
src_list=/etc/apt/sources.list.d/flotilla-synth-src.sources

derive() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    [ "$f" = "$src_list" ] && continue
    # Each deb822 stanza with "Types: deb" is copied with "Types: deb-src".
    awk 'BEGIN{RS=""; ORS="\n\n"} /(^|\n)Types:[^\n]*deb([ \t]|\n|$)/ {
           out=""; n=split($0, l, "\n");
           for (i=1;i<=n;i++) { if (l[i] ~ /^#/) continue; if (l[i] ~ /^Types:/) l[i]="Types: deb-src"; out=out l[i] "\n" }
           printf "%s\n", out }' "$f"
  done
  if [ -f /etc/apt/sources.list ]; then
    # One-line format: "deb [opts] URI SUITE COMPONENTS..." becomes a stanza.
    awk '$1=="deb" { i=2; opts=""; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
           uri=$i; suite=$(i+1); comps=""; for (j=i+2;j<=NF;j++) comps=comps " " $j;
           printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents:%s\nTrusted: yes\n\n", uri, suite, comps }' /etc/apt/sources.list
  fi
}

if [ ! -f "$src_list" ]; then
  derive > "$src_list.tmp"
  if ! grep -q '^Types: deb-src' "$src_list.tmp"; then
    rm -f "$src_list.tmp"
    echo "$0: no deb entry in /etc/apt/sources.list or /etc/apt/sources.list.d/*.sources to derive deb-src from" >&2
    exit 1
  fi
  mv "$src_list.tmp" "$src_list"
  apt-get update -qq
fi

status=0
for name in "$@"; do
  if [ -e "$out/$name" ]; then echo "$name: already in $out"; continue; fi
  work=$(mktemp -d "$out/.fetch-$name.XXXXXX")
  if ! (cd "$work" && apt-get source -qq "$name" >/dev/null 2>"$work.err"); then
    echo "$name: apt-get source failed: $(tail -3 "$work.err")" >&2
    rm -rf "$work" "$work.err"; status=1; continue
  fi
  rm -f "$work.err"
  tree=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)
  ver=$(dpkg-parsechangelog -l "$tree/debian/changelog" -S Version 2>/dev/null || basename "$tree")
  mv "$tree" "$out/$(basename "$tree")"
  rm -rf "$work"
  ln -sfn "$(basename "$tree")" "$out/$name"
  echo "$ver" > "$out/$name.version"
  echo "$name: $ver in $out/$(basename "$tree")"
done
exit $status
