// The answers the guard gives a denied request: final (never a reset, which a
// client would retry), in a form the client's own code understands.
#pragma once

#include <string>
#include <string_view>

#include "userspace/proxy/http_answer.h"

namespace faultline {

// Why the request is refused: a rule (or the default) of the policy, or an
// exhausted LLM budget.
enum class DenialCause : uint8_t { Policy, Budget };

// Whose error format the answer takes: a plain host's JSON, a model
// provider's own envelope, so that its SDK raises its usual error class, or a
// Kubernetes API server's Status, or a ClickHouse server's exception text.
enum class DenialFormat : uint8_t { Plain, Anthropic, OpenAI, Kubernetes, ClickHouse };

// A model host's format from the proxy's provider inference
// (infer_llm_provider(); `automatic` is taken as OpenAI, as it does).
[[nodiscard]] DenialFormat denial_format_for(LlmProvider provider);

struct Denial {
  DenialCause cause = DenialCause::Policy;
  std::string rule;        // the rule's name; "" for the default (or a budget)
  std::string reason;      // shown to the client
  std::string request_id;  // the activity entry's id, so a user can quote it
};

// The status, headers (without Content-Length) and body:
//   Plain      403 (budget: 429) {"error","rule","reason","request_id"}
//   Anthropic  403 {"type":"error","error":{"type":"permission_error","message"},"request_id"}
//              429 ... "rate_limit_error" for a budget; header request-id
//   OpenAI     403 {"error":{"message","type":"permission_error","param":null,"code":"policy_denied"}}
//              429 ... type and code "insufficient_quota" for a budget; header x-request-id
//   Kubernetes 403 {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
//              "message":"faultline guard: denied by rule 'R': REASON (request ID)",
//              "reason":"Forbidden","code":403}; a budget: 429 "TooManyRequests"
//   ClickHouse 403 text/plain "Code: 497. DB::Exception: faultline guard: denied by rule 'R':
//              REASON (request ID). (ACCESS_DENIED)", header X-ClickHouse-Exception-Code: 497
// Model formats carry `x-should-retry: false`, which both providers' SDKs
// obey before their own retry rules (429 would otherwise be retried).
[[nodiscard]] LlmAnswer denial_answer(const Denial& denial, DenialFormat format);

// The complete HTTP/1.1 response bytes of denial_answer().
[[nodiscard]] std::string denial_response(const Denial& denial, DenialFormat format, bool keep_alive);

}  // namespace faultline
