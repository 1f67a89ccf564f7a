#!/bin/bash
cat /app/data/code.txt > /app/answer.txt
