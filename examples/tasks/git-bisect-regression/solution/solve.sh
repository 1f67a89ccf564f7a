#!/bin/bash
set -e
cd /app/repo
for c in $(git rev-list --reverse main); do
  if [ "$(git show "$c:calc.sh" | sh -s add 7 3)" != "10" ]; then echo "$c" > /app/first_bad.txt; break; fi
done
