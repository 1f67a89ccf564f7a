"""A key-value service on a Unix socket: one command per connection (KEYS, GET <key>)."""
import json
import os
import socketserver

SOCK = "/run/kv.sock"
DATA = json.load(open("/var/lib/kv/data.json"))


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode().strip()
        if line == "KEYS":
            reply = "".join(k + "\n" for k in sorted(DATA))
        elif line.startswith("GET "):
            reply = DATA.get(line[4:], "") + "\n"
        else:
            reply = "ERR unknown command\n"
        with open("/var/log/kv-access.log", "a") as log:
            log.write(line + "\n")
        self.wfile.write(reply.encode())


if os.path.exists(SOCK):
    os.unlink(SOCK)
with socketserver.UnixStreamServer(SOCK, Handler) as server:
    server.serve_forever()
