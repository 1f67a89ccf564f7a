#!/bin/bash
test "$(tr -d '[:space:]' < /app/count.txt 2>/dev/null)" = "7"
