// libFuzzer target: the guard's reading of LLM responses (raw HTTP/1.1 from
// any upstream: the response framer, de-chunking, the SSE reader, the usage
// JSON). First byte: the endpoint, and whether the rest is a whole response
// or an SSE body behind a fixed head; second: the chunking seed. Usage must
// not depend on the split, nor the tool calls --trace-tools reads (the SSE
// tool-call reader: Anthropic tool_use blocks, OpenAI chat deltas, Responses
// items), and the filter passes a stream it removes nothing from byte for byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/guard/llm_usage.h"

namespace {

struct UsageSplitter {
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

  faultline::LlmUsageReader whole(endpoint, true);
  whole.feed(bytes);
  whole.finish();
  faultline::LlmUsageReader split(endpoint, true);
  UsageSplitter s{data[1]};
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = s.next();
    split.feed(std::string_view(bytes).substr(at, n));
    at += n;
  }
  split.finish();
  require(whole.usage() == split.usage());
  require(whole.ended() == split.ended());
  require(whole.status() == split.status());
  const std::vector<faultline::LlmToolCall> calls = whole.tool_calls();
  require(calls == split.tool_calls());
  require(calls.size() <= faultline::kMaxToolCalls);
  for (const auto& c : calls)
    require(c.arguments.size() <= faultline::kMaxToolArguments && c.id.size() <= faultline::kMaxToolLabel &&
            c.name.size() <= faultline::kMaxToolLabel);

  faultline::LlmStreamFilter f1;
  std::string out1 = f1.feed(bytes);
  out1 += f1.finish();
  faultline::LlmStreamFilter f2;
  std::string out2;
  UsageSplitter s2{data[1] * 7u + 1u};
  for (size_t at = 0; at < bytes.size();) {
    const size_t n = s2.next();
    out2 += f2.feed(std::string_view(bytes).substr(at, n));
    at += n;
  }
  out2 += f2.finish();
  require(f1.usage() == f2.usage());
  require(f1.removed_usage_chunk() == f2.removed_usage_chunk());
  // A body read until close is not re-framed: nothing removed, nothing changed.
  if (sse_only && !f1.removed_usage_chunk()) require(out1 == bytes && out2 == bytes);
  return 0;
}
