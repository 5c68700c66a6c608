// A guard's connection to its workspace on faultcp: the base URL, the token
// and one HTTP client, shared by the policy sync, the approval relay and the
// activity reporter (docs/guard.md, "With faultcp").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/http_client.h"

namespace faultline {

class GuardCpLink {
 public:
  // url: faultcp's base (http(s)://host[:port][/prefix]); token: an agent token
  // of the workspace (or a person's session). FAULTLINE_CP_CA names a PEM CA
  // for https, as for faultctl's other control-plane commands.
  [[nodiscard]] static Result<GuardCpLink> create(const std::string& url, const std::string& token);

  // One call; an answer of any status, or why there was none. content_type is
  // sent with a body; cancel_fd (readable) ends a long poll at once (ECANCELED).
  [[nodiscard]] Result<HttpAnswer> call(const std::string& method, const std::string& path,
                                        const std::string& body = "",
                                        const std::string& content_type = "application/json",
                                        uint64_t timeout_ms = 10'000, int cancel_fd = -1) const;
  [[nodiscard]] std::string text() const { return base_.text(); }

 private:
  GuardCpLink(HttpUrl base, std::string token, HttpClient client)
      : base_(std::move(base)), token_(std::move(token)), client_(std::move(client)) {}
  HttpUrl base_;
  std::string token_;
  HttpClient client_;
};

// An answer's body as a JSON object, when it is one.
[[nodiscard]] std::optional<nlohmann::json> answer_object(const HttpAnswer& a);
// "HTTP 401: <faultcp's error>" or the transport's error, for one log line.
[[nodiscard]] std::string answer_problem(const Result<HttpAnswer>& a);

}  // namespace faultline
