// libFuzzer target: HttpResponseReader reads the bytes of any server a
// guardrail is pointed at. The first byte picks how the rest is cut into reads,
// so framing across read boundaries is fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/guardrails/http.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 64;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  faultline::HttpResponseReader reader(faultline::HttpResponseReader::Limits{.max_head = 4096, .max_body = 8192});
  bool failed = false, done = false;
  for (size_t at = 0; at < in.size() && !failed && !done; at += step) {
    auto r = reader.feed(in.substr(at, step));
    failed = !r.ok();
    done = r.ok() && *r;
  }
  if (!failed && !done) {
    failed = !reader.close().ok();
    done = !failed;
  }
  if (done) {
    const auto& resp = reader.response();
    if (resp.status.code < 200 || resp.status.code > 999) __builtin_trap();  // 1xx are skipped
    if (resp.body.size() > 8192) __builtin_trap();
    // The answer does not depend on how the bytes were cut.
    faultline::HttpResponseReader whole(faultline::HttpResponseReader::Limits{.max_head = 4096, .max_body = 8192});
    auto r = whole.feed(in);
    if (!r.ok()) __builtin_trap();
    if (!*r && !whole.close().ok()) __builtin_trap();
    if (whole.response().body != resp.body || whole.response().status.code != resp.status.code) __builtin_trap();
  }
  return 0;
}
