// HTTP faults of a proxy: which requests they take (a match on host, method,
// path and headers), what they do to them (a status, a delay, a reset, a cut
// response, a provider-accurate LLM failure) and how often (percent, attempts).
// Their JSON is a Faultline extension of the Toxiproxy API.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "userspace/proxy/toxic.h"

namespace faultline {

enum class HttpFaultType : uint8_t { status, delay, reset, truncate, abort_stream, llm };
enum class DelayPoint : uint8_t { request, response };  // before the request is forwarded, or before the response
enum class LlmPreset : uint8_t { overloaded, rate_limit, server_error, bad_gateway, timeout, stream_cut };
enum class LlmProvider : uint8_t { automatic, anthropic, openai };

[[nodiscard]] std::string_view http_fault_type_name(HttpFaultType t);
[[nodiscard]] std::string_view llm_preset_name(LlmPreset p);
[[nodiscard]] std::string_view llm_provider_name(LlmProvider p);

struct HeaderMatch {
  std::string name;  // lower case
  std::string equals;
  std::string contains;
  bool has_equals = false;  // else has contains
};

// Every given member must match; an empty member matches everything.
struct HttpMatch {
  std::string host;    // the Host header (or the upstream's host); with ":port" compared whole
  std::string method;  // "POST", exactly
  std::string path;    // a prefix of the path (whole segments), or a glob (fnmatch) when it has * ? or [
  std::vector<HeaderMatch> headers;
};

// An HTTP fault made through the Toxiproxy toxic routes (http_toxic.h): what
// its toxic envelope says, kept to show it back as it was given.
struct HttpToxicForm {
  std::string type;  // "http_status", "llm_overloaded", ...
  Stream stream = Stream::downstream;
  double toxicity = 1.0;  // as given; the fault's percent is it clamped to [0, 1], x 100
};

struct HttpFault {
  std::string name;  // default: the type ("status"), "llm_<preset>" for llm
  HttpFaultType type = HttpFaultType::status;
  HttpMatch match;
  double percent = 100;  // share of matching requests faulted, [0, 100]
  int64_t attempts = 0;  // > 0: only the first N attempts of each request (AttemptCounter, docs/l7.md)
  int64_t first_n = 0;   // > 0: only the first N requests it matches (over every connection), then none

  // status: the answer sent instead of forwarding the request.
  int64_t status = 0;
  std::string body;
  std::string content_type;  // default text/plain when there is a body
  std::vector<std::pair<std::string, std::string>> headers;
  // delay: how long; status and llm timeout: how long the request hangs before the answer.
  int64_t delay_ms = 0;
  DelayPoint where = DelayPoint::request;
  int64_t bytes = 0;   // truncate: body bytes forwarded before the cut
  int64_t events = 0;  // abort_stream and llm stream_cut: SSE events forwarded before the cut

  LlmPreset preset = LlmPreset::overloaded;
  LlmProvider provider = LlmProvider::automatic;
  int64_t retry_after_s = 1;  // llm rate_limit: retry-after and the resets; 0: no retry-after header

  std::optional<HttpToxicForm> toxic;  // set: made as a Toxiproxy toxic, listed and changed as one
};

// The fault as the API shows it (every attribute of its type present).
[[nodiscard]] nlohmann::json http_fault_to_json(const HttpFault& f);

// A fault from an API body: {"name"?, "type", "match"?: {"host","method","path",
// "headers": [{"name", "equals"|"contains"}]}, "percent"?, "attempts"?, "first_n"?,
// "attributes"?: {...}}. Unknown members are refused by name; errors are bad
// input and name the field: `http fault: "attributes.status": must be 100..599, got 42`.
[[nodiscard]] Result<HttpFault> http_fault_from_json(const nlohmann::json& body);

[[nodiscard]] Status validate_http_fault(const HttpFault& f);

// Why the fault cannot apply to a TLS connection that is not terminated, where
// the proxy reads only the ClientHello (docs/tls.md): only `delay` (before the
// request) and `reset`, matched on the host (the SNI); "" when it can.
[[nodiscard]] std::string needs_plaintext(const HttpFault& f);

}  // namespace faultline
