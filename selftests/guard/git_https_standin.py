#!/usr/bin/env python3
# A loopback HTTPS stand-in for the guard's CA tests: git's smart HTTP served
# by Debian's `git http-backend` (as CGI) under /git/, and a GitHub-API-like
# answer under /api/v3/ (what `gh api --hostname HOST` asks). Prints
# "PORT N", then "REQ METHOD PATH" per request; serves until killed.
#
#   git_https_standin.py CERT KEY PROJECT_ROOT [PORT]   (PORT default 0: any)
import http.server
import json
import os
import ssl
import subprocess
import sys

cert, key, root = sys.argv[1:4]
port = int(sys.argv[4]) if len(sys.argv) > 4 else 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.serve()

    def do_POST(self):
        self.serve()

    def answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def serve(self):
        print("REQ", self.command, self.path, flush=True)
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if path.startswith("/api/v3/"):
            if self.headers.get("Authorization", "") != "token standin-token":
                self.answer(401, [("Content-Type", "application/json")], b'{"message":"Bad credentials"}')
                return
            self.answer(200, [("Content-Type", "application/json")],
                        json.dumps({"login": "standin-user", "path": path}).encode())
            return
        if not path.startswith("/git/"):
            self.answer(404, [("Content-Type", "text/plain")], b"not found\n")
            return
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path[len("/git"):],
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
        }
        for name in ("Git-Protocol", "Content-Encoding"):
            if self.headers.get(name):
                env["HTTP_" + name.upper().replace("-", "_")] = self.headers[name]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, content = out.partition(sep)
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.answer(status, headers, content)


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("PORT", server.server_address[1], flush=True)
server.serve_forever()
