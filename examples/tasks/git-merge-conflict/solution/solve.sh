#!/bin/bash
set -e
cd /app/repo
git merge feature || true
printf 'name=api\ntimeout=45\nlog=debug\nretries=5\n' > settings.conf
git add settings.conf
git commit -qm "merge feature"
