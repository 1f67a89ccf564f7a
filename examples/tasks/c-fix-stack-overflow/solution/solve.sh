#!/bin/bash
set -e
cd /app/wordlen
sed -i 's/char word\[16\];/char word[100001];/; s/n < 1000000/n < 100000/' wordlen.c
make -B
