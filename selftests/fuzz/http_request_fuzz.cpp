// libFuzzer target: HttpRequestParser reads the bytes of any client of our HTTP
// APIs (faultd's socket, /metrics, later the Toxiproxy API). The first byte picks
// how the rest is cut into reads, so framing across read boundaries is fuzzed
// too; every request read must be the same as when the bytes come whole.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/net/http_request.h"

namespace {

struct Outcome {
  std::vector<faultline::HttpRequest> requests;
  int error = 0;
};

Outcome parse_all(std::string_view in, size_t step) {
  const faultline::HttpRequestParser::Limits limits{.max_head = 2048, .max_body = 4096};
  faultline::HttpRequestParser parser(limits);
  Outcome out;
  std::string pending;
  for (size_t at = 0; at < in.size(); at += step) {
    pending.append(in.substr(at, step));
    size_t pos = 0;
    for (;;) {
      pos += parser.feed(std::string_view(pending).substr(pos));
      if (parser.state() == faultline::HttpRequestParser::State::Failed) {
        const int s = parser.error_status();
        if (s != 400 && s != 413 && s != 414 && s != 431 && s != 505) __builtin_trap();
        out.error = s;
        return out;
      }
      if (parser.state() != faultline::HttpRequestParser::State::Ready) break;
      faultline::HttpRequest req = parser.take();
      if (req.body.size() > limits.max_body) __builtin_trap();
      if (req.path.empty() || req.path[0] != '/') __builtin_trap();
      for (const auto& [k, v] : req.headers) {
        for (char c : k) {
          if (c >= 'A' && c <= 'Z') __builtin_trap();  // names are lower case
        }
      }
      (void)req.query_param("format");
      const bool close = !req.keep_alive;
      out.requests.push_back(std::move(req));
      if (close) return out;
      if (pos >= pending.size()) break;
    }
    pending.erase(0, pos);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 64;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const Outcome cut = parse_all(in, step);
  const Outcome whole = parse_all(in, in.size() + 1);
  if (cut.requests.size() != whole.requests.size()) __builtin_trap();
  for (size_t i = 0; i < cut.requests.size(); ++i) {
    const auto& a = cut.requests[i];
    const auto& b = whole.requests[i];
    if (a.method != b.method || a.path != b.path || a.query != b.query || a.body != b.body || a.headers != b.headers)
      __builtin_trap();
  }
  if (cut.error != whole.error) __builtin_trap();
  return 0;
}
