#!/usr/bin/env python3
# A loopback HTTPS stand-in for an OpenAI-style API, for the guard's --creds
# tests: POST /v1/chat/completions answers a completion when its
# Authorization is "Bearer " + the key in KEY_FILE, else 401 as the provider
# does. Prints "PORT N", then "REQ auth=ok|bad|none" per request (never a
# header's value); serves until killed.
#
#   creds_https_standin.py CERT KEY KEY_FILE
import http.server
import json
import ssl
import sys

cert, key, key_file = sys.argv[1:4]
with open(key_file) as f:
    expected = "Bearer " + f.read().strip()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        got = self.headers.get("Authorization")
        verdict = "none" if got is None else ("ok" if got == expected else "bad")
        print("REQ auth=" + verdict, flush=True)
        if verdict == "ok" and self.path == "/v1/chat/completions":
            status = 200
            body = {
                "id": "chatcmpl-standin",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "injected ok"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            }
        else:
            status = 401
            body = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                              "param": None, "code": "invalid_api_key"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("PORT %d" % server.server_address[1], flush=True)
server.serve_forever()
