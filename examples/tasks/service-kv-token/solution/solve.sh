#!/bin/bash
set -e
python3 /app/kvserver.py &
server=$!
for i in $(seq 50); do [ -S /run/kv.sock ] && break; sleep 0.1; done
ask() { python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect("/run/kv.sock"); s.sendall((sys.argv[1] + "\n").encode())
print(s.makefile().read(), end="")' "$1"; }
key=$(ask KEYS | grep '^token-' | head -1)
ask "GET $key" | tr -d '\n' > /app/token.txt
kill $server
