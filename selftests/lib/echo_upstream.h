// A plain HTTP upstream for the guard's gateway tests: python3's threading
// HTTP server on 127.0.0.1 inside a test's network namespace. GET answers
// 200 "upstream saw PATH" and prints "REQ PATH" (a test counts what got
// through by those lines).
#pragma once

#include <optional>
#include <string>

#include "selftests/lib/child_process.h"

namespace fltest {

inline ChildProcess spawn_echo_upstream(const std::string& netns) {
  static const char* const kServer =
      "import http.server\n"
      "class H(http.server.BaseHTTPRequestHandler):\n"
      "  def do_GET(self):\n"
      "    b = ('upstream saw ' + self.path).encode()\n"
      "    self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers()\n"
      "    self.wfile.write(b); print('REQ', self.path, flush=True)\n"
      "  def log_message(self, *a): pass\n"
      "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
      "print('PORT', s.server_address[1], flush=True)\n"
      "s.serve_forever()\n";
  return ChildProcess::spawn({"ip", "netns", "exec", netns, "python3", "-c", kServer});
}

// "127.0.0.1:PORT" once the upstream listens; nothing if it did not in 10 s.
inline std::optional<std::string> echo_upstream_address(ChildProcess& upstream) {
  auto line = upstream.wait_line_starting("PORT ", 10s);
  if (!line) return std::nullopt;
  return "127.0.0.1:" + line->substr(5);
}

}  // namespace fltest
