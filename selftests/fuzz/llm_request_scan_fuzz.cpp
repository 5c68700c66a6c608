// libFuzzer target: the guard's streaming scan of LLM request bodies (any
// bytes, from any client). The first two bytes seed the chunking; the facts,
// the state and the rewritten body must not depend on where the body is split,
// and the scanner's memory stays small.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/guard/llm_request_scan.h"

namespace {

using faultline::LlmRequestScanner;
using faultline::LlmScanState;

// Chunk sizes from a seed: mostly small (1..8), sometimes large.
struct Splitter {
  uint32_t x;
  size_t next() {
    x = x * 1103515245u + 12345u;
    const uint32_t r = x >> 16;
    return (r & 7) == 0 ? 1 + (r % 4096) : 1 + (r % 8);
  }
};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t seed = data[0] | (uint32_t{data[1]} << 8);
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);

  LlmRequestScanner whole;
  (void)whole.feed(body);
  (void)whole.finish();

  LlmRequestScanner split;
  Splitter s{seed};
  for (size_t at = 0; at < body.size();) {
    const size_t n = s.next();
    (void)split.feed(body.substr(at, n));
    check(split.state_bytes() < 4096);
    at += n;
  }
  (void)split.finish();

  check(whole.state() == split.state());
  check(whole.why_unparseable() == split.why_unparseable());
  const auto& a = whole.facts();
  const auto& b = split.facts();
  check(a.model == b.model && a.stream == b.stream && a.max_tokens == b.max_tokens &&
        a.stream_options_present == b.stream_options_present);

  // The rewrite: the same output whatever the split; an unparseable body
  // passes as it came; a parseable one stays parseable, with the routed model.
  const std::vector<faultline::LlmModelRoute> routes = {{a.model.value_or("m"), "routed \"x\""}};
  faultline::LlmRequestRewriter rw1(faultline::LlmEndpoint::OpenAIChat, routes, true);
  std::string out1 = rw1.feed(body);
  out1 += rw1.finish();
  faultline::LlmRequestRewriter rw2(faultline::LlmEndpoint::OpenAIChat, routes, true);
  std::string out2;
  Splitter s2{seed ^ 0x5a5au};
  for (size_t at = 0; at < body.size();) {
    const size_t n = s2.next();
    out2 += rw2.feed(body.substr(at, n));
    at += n;
  }
  out2 += rw2.finish();
  check(out1 == out2);
  check(static_cast<int64_t>(out1.size()) - static_cast<int64_t>(body.size()) == rw1.length_delta());
  if (!rw1.routed_from() && !rw1.usage_injected()) check(out1 == body);
  if (whole.state() != LlmScanState::unparseable) {
    LlmRequestScanner again;
    (void)again.feed(out1);
    check(again.finish() == LlmScanState::complete);
    if (a.model) check(again.facts().model == "routed \"x\"");
    check(again.facts().stream == a.stream && again.facts().max_tokens == a.max_tokens);
  }
  return 0;
}
