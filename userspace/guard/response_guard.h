// --scan-responses and --block-responses: an LLM answer's texts (the model's
// text, thinking and tool-call arguments, JSON or streamed) scanned for a
// secret (the DLP detectors) and for injection text (the prompt guard's
// rules, read as untrusted text); a threat is reported, and with blocking a
// JSON answer becomes the provider's error and a stream ends with the
// provider's own mid-stream error event. docs/detectors.md, "Responses".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "userspace/guard/dlp_engine.h"
#include "userspace/guard/guard_answer.h"
#include "userspace/guard/llm_request_scan.h"
#include "userspace/guard/prompt_guard.h"
#include "userspace/proxy/request_judge.h"

namespace faultline {

// One threat in an answer: a secret, or injection text.
struct ResponseThreat {
  std::string kind;    // a DLP type ("aws_access_key") or an injection family ("instruction_override")
  std::string where;   // "answer text", "thinking", "tool call arguments"
  std::string detail;  // for people: a masked hint, or how the text was read; never the secret
  bool secret = false;
  bool operator==(const ResponseThreat&) const = default;
};

// The detectors an answer is read with, built once: every DLP detector but
// email (an address in an answer is no secret) and the prompt guard's rules.
class ResponseGuard {
 public:
  // prompt: --prompt-guard's rules when it is on (null: built here).
  [[nodiscard]] static Result<std::shared_ptr<const ResponseGuard>> build(std::shared_ptr<PromptGuard> prompt);
  [[nodiscard]] const std::shared_ptr<const DlpEngine>& dlp() const { return dlp_; }
  [[nodiscard]] const PromptGuard& prompt() const { return *prompt_; }

 private:
  ResponseGuard() = default;
  std::shared_ptr<const DlpEngine> dlp_;
  std::shared_ptr<PromptGuard> prompt_;
};

// The texts of one answer, fed as the provider's JSON: whole (body()) or one
// SSE event's data at a time (event()), then finish(). Each text (a content
// block, a choice's content, a tool call's arguments) is a channel of its
// own: a DLP stream (a secret split over many deltas is found), and the
// injection rules over its last KiB after each piece and over the whole
// (first 256 KiB) at its end.
class ResponseScanner {
 public:
  ResponseScanner(std::shared_ptr<const ResponseGuard> guard, LlmEndpoint endpoint);
  ~ResponseScanner();
  ResponseScanner(const ResponseScanner&) = delete;
  ResponseScanner& operator=(const ResponseScanner&) = delete;

  void event(std::string_view data);
  void body(std::string_view json);
  void finish();
  // Every threat found so far, each (kind, where) once.
  [[nodiscard]] const std::vector<ResponseThreat>& threats() const;
  // Where the texts stood after the pieces fed since the last take_mark():
  // each channel a piece went to, and its length then. Empty: none.
  using Mark = std::vector<std::pair<std::string, uint64_t>>;
  [[nodiscard]] Mark take_mark();
  // No secret can still be confirmed in the texts up to the mark (their DLP
  // streams settled past it, or ended).
  [[nodiscard]] bool settled(const Mark& mark) const;
  // The model's answer text (not thinking or tool arguments), its channels
  // in order, each its first 256 KiB (--receipts reads its claims).
  [[nodiscard]] std::string answer_text() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What a threat report says: the threats, and whether the answer was stopped.
using ResponseThreatReport = std::function<void(const std::vector<ResponseThreat>& threats, bool blocked)>;

// The response stream of one LLM call, fed the upstream's raw bytes (head,
// then body with its framing), as the proxy's response transformer.
//   block false: the bytes are only read (feed() returns nothing: use it
//     beside the forward, from on_response_bytes); the report comes at finish().
//   block true: a 2xx JSON answer (or a stream of known length) is held
//     whole (16 MiB at most, else passed on unscanned), then forwarded as it
//     came or replaced by `denial` in the provider's envelope (x-should-retry:
//     false); a 2xx chunked or close-delimited event stream passes event by
//     event, each held until its texts are settled, and at a threat the
//     held events are dropped, the provider's mid-stream error event is sent
//     and the stream is ended. Anything else passes unchanged.
// The report is made once, when the answer ends or is stopped, if it found any.
class ResponseGuardStream final : public ByteTransformer {
 public:
  struct Options {
    std::shared_ptr<const ResponseGuard> guard;
    LlmEndpoint endpoint = LlmEndpoint::None;
    bool block = false;
    Denial denial;  // the rule, the request id; the reason names the threats
    DenialFormat format = DenialFormat::OpenAI;
    ResponseThreatReport report;
  };
  explicit ResponseGuardStream(Options options);
  ~ResponseGuardStream() override;
  [[nodiscard]] std::string feed(std::string_view bytes) override;
  [[nodiscard]] std::string finish() override;
  [[nodiscard]] const std::vector<ResponseThreat>& threats() const;
  [[nodiscard]] bool blocked() const;
  // Why the answer was not read ("" when it was): an error status, a
  // compressed body, a JSON answer over 16 MiB, bad framing.
  [[nodiscard]] std::string_view unread() const;
  [[nodiscard]] const ResponseScanner& scanner() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The provider's mid-stream error event for a denial: Anthropic's `event:
// error` with its error envelope, OpenAI chat's `data: {"error":{...}}`, and
// for the Responses API an `event: error` of type error that also carries
// the chat's `error` object (the openai SDK raises on it).
[[nodiscard]] std::string sse_error_event(const Denial& denial, DenialFormat format, LlmEndpoint endpoint);

}  // namespace faultline
