// The LLM facts of a request body (model, stream, max tokens), read by a
// streaming scan of its top-level JSON object that never buffers the prompt,
// and the streaming rewrite of that body (--route-model, include_usage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

// The model APIs whose request bodies carry the facts.
enum class LlmEndpoint : uint8_t {
  None,               // not an LLM call the guard reads
  AnthropicMessages,  // POST /v1/messages
  OpenAIChat,         // POST /v1/chat/completions
  OpenAIResponses,    // POST /v1/responses
};

// The endpoint of a request target ("/v1/messages?beta=true" is Messages);
// the query is ignored, the path compared exactly.
[[nodiscard]] LlmEndpoint llm_endpoint_for_target(std::string_view target);

// What the top-level object of a request body says. Each fact is unset when its
// key is absent (or null, which the providers take as absent).
struct LlmRequestFacts {
  std::optional<std::string> model;     // the string, unescaped
  std::optional<bool> stream;           // absent means no stream
  std::optional<uint64_t> max_tokens;   // max_tokens, max_completion_tokens or max_output_tokens (the largest)
  bool stream_options_present = false;  // a top-level "stream_options" key (any value)
};

// Where a scan stands. `complete`: the facts will not change any more (the
// object ended), or every fact has been seen (model, stream and a max-tokens
// key) so a judge need not wait for the rest of the body; feeding more bytes
// after that still checks them (a conflicting duplicate key turns the scan
// unparseable). `unparseable`: not a JSON object, or a fact of the wrong type,
// or a duplicate model/stream with a different value: the facts are unknown
// (RequestFacts::llm_facts_unparseable, which makes fact rules fail safe).
enum class LlmScanState : uint8_t { scanning, complete, unparseable };

// An incremental scanner of one request body. Fed chunks of any size, in
// order; every byte is looked at once, strings are skipped without being kept
// (except a top-level key, and the model value, both bounded), nesting costs
// one bit per level: its memory does not grow with the body.
//
//   LlmRequestScanner scan;
//   for (chunk : body) if (scan.feed(chunk) != LlmScanState::scanning) break;  // or keep feeding
//   scan.finish();  // at the end of the body: an object not closed is unparseable
//   facts = scan.facts(); unparseable = scan.state() == LlmScanState::unparseable;
class LlmRequestScanner {
 public:
  // What bounds the scan: nesting deeper than max_depth, a model longer than
  // max_model_bytes (unescaped) are unparseable.
  static constexpr size_t kMaxDepth = 256;
  static constexpr size_t kMaxModelBytes = 256;

  // Called by the rewriter at points of the byte stream: `at` is an index
  // into the chunk being fed.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void model_value_begins(size_t at) = 0;  // the opening quote of the top-level model string
    virtual void model_value_ends(size_t at) = 0;    // its closing quote (facts().model is set)
    virtual void object_ends(size_t at) = 0;         // the top-level closing brace
  };

  LlmRequestScanner() = default;

  LlmScanState feed(std::string_view chunk);
  // The body ended: a scan still in the object (or with nothing seen) is unparseable.
  LlmScanState finish();

  [[nodiscard]] LlmScanState state() const;
  [[nodiscard]] const LlmRequestFacts& facts() const { return facts_; }
  [[nodiscard]] bool object_ended() const { return phase_ == Phase::done; }
  // Why a scan is unparseable ("" otherwise), for a log line.
  [[nodiscard]] std::string_view why_unparseable() const { return why_; }
  [[nodiscard]] size_t top_level_members() const { return members_; }
  // The bytes this scanner holds, heap included: stays small whatever the body.
  [[nodiscard]] size_t state_bytes() const;

  void set_observer(Observer* observer) { observer_ = observer; }

 private:
  enum class Phase : uint8_t {
    start,        // before the top-level value
    value,        // a value is due
    key_or_end,   // after '{'
    array_start,  // after '['
    key,          // after ',' in an object
    colon,        // after a key
    after_value,  // ',' or the container's close
    string,       // in a string
    escape,       // after a backslash
    unicode,      // in \uXXXX
    number,
    literal,  // true, false, null
    done,     // the top-level object ended: whitespace only
    bad,
  };
  // What a string being read is for.
  enum class StringRole : uint8_t { skip, top_key, model };
  // The top-level key whose value comes next.
  enum class Field : uint8_t { other, model, stream, max_tokens, stream_options };

  void fail(std::string_view why);
  void begin_value(char c, size_t at);
  void end_value();
  void end_string(size_t at);
  void put_decoded(uint32_t code_point);
  void flush_surrogate();
  void close_container(char c, size_t at);
  void put_byte(char c);
  void end_number();
  void end_literal();
  [[nodiscard]] bool all_seen() const;

  Phase phase_ = Phase::start;
  Phase after_escape_ = Phase::string;
  StringRole role_ = StringRole::skip;
  Field field_ = Field::other;
  bool string_is_key_ = false;
  bool value_is_top_ = false;  // the value being read is a member of the top-level object
  std::string stack_;          // '{' or '[' per open container (bounded by kMaxDepth)
  std::string text_;           // the top-level key or model being unescaped (bounded)
  bool text_overflow_ = false;
  uint32_t unicode_ = 0;
  uint8_t unicode_digits_ = 0;
  uint16_t high_surrogate_ = 0;
  // A number or literal: its grammar state, and for a max-tokens value its value.
  uint8_t num_state_ = 0;
  bool num_negative_ = false;
  bool num_fraction_ = false;  // a fraction or exponent: read with strtod
  std::string num_text_;       // a max-tokens number's text (bounded)
  const char* literal_ = nullptr;
  uint8_t literal_at_ = 0;
  size_t members_ = 0;
  bool max_seen_ = false;
  LlmRequestFacts facts_;
  std::string why_;
  Observer* observer_ = nullptr;
};

// --route-model FROM=TO: a request asking for model FROM is sent as TO.
struct LlmModelRoute {
  std::string from;
  std::string to;
};

// "FROM=TO", both non-empty. An error says why.
[[nodiscard]] Result<LlmModelRoute> parse_model_route(std::string_view text);

// The streaming rewrite of a request body, fed the client's body chunks in
// order; returns the bytes to send upstream in their place (possibly empty
// while a model value is held: at most its raw bytes, a few hundred). It
//   - replaces the top-level model value when it equals a route's `from`
//     (the first that does) by the route's `to`, JSON-escaped;
//   - on /v1/chat/completions with "stream": true and no top-level
//     "stream_options", when asked (inject_include_usage), adds
//     ,"stream_options":{"include_usage":true} before the closing brace, so
//     the stream ends with a usage chunk; usage_injected() then tells the
//     response side to remove that chunk (LlmStreamFilter, llm_usage.h).
// Every other byte passes unchanged and in order. An unparseable body is
// passed through untouched from where the scan failed.
//
// The length changes (length_delta()), and the delta is final only at the end
// of the body (the model may come after the prompt, the injection at the
// closing brace). A proxy therefore either
//   1. sends the body with Transfer-Encoding: chunked in place of its
//      Content-Length (each feed() result one chunk; nothing is buffered), or
//   2. holds the body until finish() and sends Content-Length plus
//      length_delta() (buffers the prompt: only for small bodies).
// Upstreams of the model APIs accept chunked request bodies, so 1 is the default.
class LlmRequestRewriter : private LlmRequestScanner::Observer {
 public:
  LlmRequestRewriter(LlmEndpoint endpoint, std::vector<LlmModelRoute> routes, bool inject_include_usage);
  LlmRequestRewriter(const LlmRequestRewriter&) = delete;
  LlmRequestRewriter& operator=(const LlmRequestRewriter&) = delete;

  [[nodiscard]] std::string feed(std::string_view chunk);
  // The end of the body: what was still held.
  [[nodiscard]] std::string finish();

  [[nodiscard]] const LlmRequestScanner& scanner() const { return scan_; }
  // The model as the client asked for it when a route was applied, else unset.
  [[nodiscard]] const std::optional<std::string>& routed_from() const { return routed_from_; }
  [[nodiscard]] bool usage_injected() const { return injected_; }
  // Bytes sent minus bytes received so far.
  [[nodiscard]] int64_t length_delta() const { return delta_; }

  // The text injected into the object.
  static constexpr std::string_view kIncludeUsage = R"("stream_options":{"include_usage":true})";

 private:
  void model_value_begins(size_t at) override;
  void model_value_ends(size_t at) override;
  void object_ends(size_t at) override;
  void emit(std::string_view bytes);

  LlmRequestScanner scan_;
  LlmEndpoint endpoint_;
  std::vector<LlmModelRoute> routes_;
  bool inject_ = false;
  // One feed(): the chunk, how far it has been copied out, the output.
  std::string_view chunk_;
  size_t copied_ = 0;
  std::string out_;
  bool holding_ = false;
  std::string held_;  // the raw model value while it is read
  std::optional<std::string> routed_from_;
  bool injected_ = false;
  int64_t delta_ = 0;
};

}  // namespace faultline
