#!/bin/bash
set -e
rot13 < /app/message.txt > /app/decoded.txt
