// libFuzzer target: --scan-responses and --block-responses over any answer
// bytes (raw HTTP/1.1 from any upstream: the framer, de-chunking, the SSE
// reader, the provider JSON, the DLP and injection scans of its texts). First
// byte: the endpoint, and whether the rest is a whole response or an SSE body
// behind a fixed close-delimited head; second: the chunking seed. The threats
// must not depend on the split; blocking a close-delimited stream passes it
// byte for byte when it finds nothing, and otherwise sends a prefix of it and
// then the provider's error event.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "userspace/guard/response_guard.h"

namespace {

struct AnswerSplitter {
  uint32_t x;
  size_t next() {
    x = x * 1664525u + 1013904223u;
    const uint32_t r = x >> 16;
    return (r & 7) == 0 ? 1 + (r % 2048) : 1 + (r % 6);
  }
};

void require(bool ok) {
  if (!ok) __builtin_trap();
}

const std::shared_ptr<const faultline::ResponseGuard>& detectors() {
  static const auto guard = [] {
    auto g = faultline::ResponseGuard::build(nullptr);
    require(static_cast<bool>(g));
    return *g;
  }();
  return guard;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using faultline::LlmEndpoint;
  if (size < 2) return 0;
  const LlmEndpoint endpoints[] = {LlmEndpoint::AnthropicMessages, LlmEndpoint::OpenAIChat,
                                   LlmEndpoint::OpenAIResponses};
  const LlmEndpoint endpoint = endpoints[(data[0] & 0x7f) % 3];
  const bool sse_only = (data[0] & 0x80) != 0;
  std::string bytes = sse_only ? "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" : "";
  bytes.append(reinterpret_cast<const char*>(data) + 2, size - 2);

  auto run = [&](bool block, uint32_t seed, bool whole, std::string& out) {
    faultline::ResponseGuardStream::Options o;
    o.guard = detectors();
    o.endpoint = endpoint;
    o.block = block;
    o.denial.rule = "response-guard";
    o.format = endpoint == LlmEndpoint::AnthropicMessages ? faultline::DenialFormat::Anthropic
                                                          : faultline::DenialFormat::OpenAI;
    auto s = std::make_unique<faultline::ResponseGuardStream>(std::move(o));
    AnswerSplitter split{seed};
    for (size_t at = 0; at < bytes.size();) {
      const size_t n = whole ? bytes.size() : split.next();
      out += s->feed(std::string_view(bytes).substr(at, n));
      at += n;
    }
    out += s->finish();
    return s;
  };
  std::string o1, o2, o3;
  auto whole = run(false, 0, true, o1);
  auto split = run(false, data[1], false, o2);
  require(o1.empty() && o2.empty());  // reading only: nothing is sent in place of the answer
  require(whole->threats() == split->threats());
  auto blocked = run(true, data[1] * 7u + 1u, false, o3);
  require(blocked->threats() == whole->threats());
  if (sse_only && whole->unread().empty()) {
    if (blocked->threats().empty()) {
      require(o3 == bytes);
    } else {
      require(blocked->blocked());
      const size_t event =
          o3.rfind("event: error\n") != std::string::npos ? o3.rfind("event: error\n") : o3.rfind("data: {\"error\"");
      require(event != std::string::npos);
      require(bytes.compare(0, event, o3, 0, event) == 0);
    }
  }
  return 0;
}
