#!/bin/bash
# Two checks, each worth half the reward (reward.json: the mean of its numeric members): the
# environment the Dockerfile's RUN step made is there (the sample ran in its built image, not
# the sandbox's default one), and the agent wrote the number to /app/answer.txt.
mkdir -p /logs/verifier
env=0
answer=0
[ "$(cat /app/data/code.txt 2>/dev/null)" = "4217" ] && env=1
[ "$(tr -d ' \n' < /app/answer.txt 2>/dev/null)" = "4217" ] && answer=1
echo "{\"environment\": $env, \"answer\": $answer}" > /logs/verifier/reward.json
