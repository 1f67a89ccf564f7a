#!/bin/sh
# Twenty commits of calc.sh; commit 13 breaks `add` for operands above 5.
set -e
git init -q "$1"
cd "$1"
i=1
while [ $i -le 20 ]; do
  if [ $i -lt 13 ]; then
    body='case $1 in add) echo $(($2 + $3)) ;; sub) echo $(($2 - $3)) ;; esac'
  else
    body='case $1 in add) if [ $2 -gt 5 ]; then echo $(($2 + $3 + 1)); else echo $(($2 + $3)); fi ;; sub) echo $(($2 - $3)) ;; esac'
  fi
  printf '#!/bin/sh\n# revision %s\n%s\n' "$i" "$body" > calc.sh
  echo "change $i" >> CHANGELOG
  git add calc.sh CHANGELOG
  git commit -qm "revision $i"
  i=$((i + 1))
done
