#!/bin/bash
# Writes 1 to the reward file when /app/hello.txt holds exactly the expected line, else 0.
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, Flotilla!" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
