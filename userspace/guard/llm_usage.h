// The tokens an LLM call used, read from its response as it passes through the
// proxy (raw HTTP/1.1 bytes: JSON answers and SSE streams, any chunking), and
// the filter that removes the usage chunk the guard asked for on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/guard/llm_request_scan.h"

namespace faultline {

// One call's usage, in the provider's own terms:
//   Anthropic  input = input_tokens (without the cache), cache_read =
//              cache_read_input_tokens, cache_creation = cache_creation_input_tokens,
//              output = output_tokens (thinking included), reasoning = 0 (not reported apart)
//   OpenAI     input = prompt_tokens / input_tokens (cached ones included),
//              cache_read = its cached_tokens, output = completion_tokens /
//              output_tokens (reasoning included), reasoning = reasoning_tokens
// `output` is what the providers bill as output, and what a token budget counts.
struct LlmUsage {
  std::string model;  // as the answer names it ("" when it does not)
  uint64_t input = 0;
  uint64_t output = 0;
  uint64_t cache_read = 0;
  uint64_t cache_creation = 0;
  uint64_t reasoning = 0;

  friend bool operator==(const LlmUsage&, const LlmUsage&) = default;
};

// A tool call the model decided (--trace-tools): Anthropic's tool_use block
// (streamed: content_block_start, then input_json_delta pieces), OpenAI chat's
// tool_calls (streamed: deltas by index), a Responses function_call item.
struct LlmToolCall {
  std::string id;          // cut at kMaxToolLabel
  std::string name;        // cut at kMaxToolLabel
  std::string arguments;   // JSON text as the model wrote it (cut at kMaxToolArguments)
  bool truncated = false;  // the arguments were longer
  friend bool operator==(const LlmToolCall&, const LlmToolCall&) = default;
};
inline constexpr size_t kMaxToolCalls = 256;            // per answer; later ones are not kept
inline constexpr size_t kMaxToolArguments = 64 * 1024;  // bytes per call
inline constexpr size_t kMaxToolLabel = 256;            // bytes of an id or a name

// The reader of one response, fed the bytes RequestJudge::on_response_bytes
// gets (status line, headers, then the body with its chunked framing, as the
// upstream sent them; plaintext), in order, in pieces of any size:
//
//   LlmUsageReader r(llm_endpoint_for_target(head.target));
//   on_response_bytes(id, bytes, end):  r.feed(bytes); if (end) { r.finish(); log(r.usage()); }
//
// It reads the head (skipping 1xx), de-chunks a chunked body, then the body
// as SSE when Content-Type is text/event-stream, else as one JSON document:
//   Anthropic  JSON `usage`; SSE message_start's message.usage, then every
//              message_delta's usage (cumulative: the last one wins, field by field)
//   OpenAI chat  JSON `usage`; SSE the chunk with a non-null `usage` (sent
//              last when stream_options.include_usage is set)
//   Responses  JSON `usage`; SSE the terminal event's response.usage
//              (response.completed, also response.incomplete and response.failed)
// A stream cut short keeps the last usage it saw; an answer without one (an
// error status, a compressed body, a cut before any) has none.
class LlmUsageReader {
 public:
  // trace_tools: also collect the answer's tool calls (tool_calls()).
  explicit LlmUsageReader(LlmEndpoint endpoint, bool trace_tools = false);
  ~LlmUsageReader();
  LlmUsageReader(const LlmUsageReader&) = delete;
  LlmUsageReader& operator=(const LlmUsageReader&) = delete;

  void feed(std::string_view bytes);
  // The exchange is over (or the connection closed mid-way): a JSON body is read now.
  void finish();

  [[nodiscard]] std::optional<LlmUsage> usage() const;
  // The answer ran to its end: the JSON body whole, or the stream's terminal
  // event (message_stop, data: [DONE], response.completed...). False for a cut.
  [[nodiscard]] bool ended() const;
  [[nodiscard]] int status() const;  // 0 until the head is read
  // Why no usage can be read ("" when it can): a compressed body, bad framing.
  [[nodiscard]] std::string_view problem() const;

  // The tool calls seen so far, in the order they began; a streamed call is
  // listed once its block (Anthropic), its item (Responses) or the stream
  // (OpenAI chat) ended. Empty unless trace_tools.
  [[nodiscard]] std::vector<LlmToolCall> tool_calls() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The client's view of an OpenAI chat stream whose request got include_usage
// from the guard (LlmRequestRewriter::usage_injected()): fed the upstream's
// raw response bytes, returns the bytes to send the client in their place,
// which are the same bytes without the usage chunk (the SSE event whose JSON
// has an empty `choices` and a `usage` object). The head passes as it came;
// a chunked body is re-framed (the event bytes are exact, the chunk sizes are
// new: one chunk per feed() result); a body of known length is passed
// untouched (its length cannot change; SSE is never sent that way by the
// providers). An event is held until its blank line ends it. Usage is read
// by the same pass (usage()), so a proxy that filters needs no second reader.
class LlmStreamFilter {
 public:
  LlmStreamFilter();
  ~LlmStreamFilter();
  LlmStreamFilter(const LlmStreamFilter&) = delete;
  LlmStreamFilter& operator=(const LlmStreamFilter&) = delete;

  [[nodiscard]] std::string feed(std::string_view bytes);
  // The end of the upstream's bytes: whatever was held (an event without its
  // blank line at a cut) goes to the client.
  [[nodiscard]] std::string finish();

  [[nodiscard]] std::optional<LlmUsage> usage() const;
  [[nodiscard]] bool removed_usage_chunk() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace faultline
