#!/bin/bash
set -e
install -d -o root -m 700 /quarantine
cd /data
find . -type f -user mallory | while read -r f; do
  mkdir -p "/quarantine/$(dirname "$f")"
  mv "$f" "/quarantine/$f"
done
