// faultctl's connection to faultcp: the base URL (--control-plane), the
// bearer token and one HTTP client. The guard's policy sync, approval relay
// and activity reporter share one (docs/guard.md, "With faultcp"); so do the
// remote commands (faultctl run/list/policy --control-plane) and faultctl mcp.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/http_client.h"

namespace faultline {

class CpLink {
 public:
  struct Options {
    // What a missing token should be, said in the error ("an agent token of the workspace ...").
    std::string token_hint = "an API or session token";
    uint64_t timeout_ms = 10'000;  // a call's deadline unless it gives its own
    size_t max_body = 0;           // an answer's largest body; 0: the client's default
  };
  // url: faultcp's base (http(s)://host[:port][/prefix]); token: a token of
  // the workspace. FAULTLINE_CP_CA names a PEM CA for https. Bad input
  // (a bad URL, no token) is an input error naming --control-plane or --token.
  [[nodiscard]] static Result<CpLink> create(const std::string& url, const std::string& token, Options options);
  [[nodiscard]] static Result<CpLink> create(const std::string& url, const std::string& token) {
    return create(url, token, Options{});
  }

  // One call; an answer of any status, or why there was none. content_type is
  // sent with a body; timeout_ms 0: the link's; cancel_fd (readable) ends a
  // long poll at once (ECANCELED).
  [[nodiscard]] Result<HttpAnswer> call(const std::string& method, const std::string& path,
                                        const std::string& body = "",
                                        const std::string& content_type = "application/json", uint64_t timeout_ms = 0,
                                        int cancel_fd = -1) const;
  [[nodiscard]] const HttpUrl& base() const { return base_; }
  [[nodiscard]] std::string text() const { return base_.text(); }

 private:
  CpLink(HttpUrl base, std::string token, HttpClient client, uint64_t timeout_ms)
      : base_(std::move(base)), token_(std::move(token)), client_(std::move(client)), timeout_ms_(timeout_ms) {}
  HttpUrl base_;
  std::string token_;
  HttpClient client_;
  uint64_t timeout_ms_;
};

// An answer's body as a JSON object, when it is one.
[[nodiscard]] std::optional<nlohmann::json> answer_object(const HttpAnswer& a);
// "HTTP 401: <faultcp's error>" or the transport's error, for one log line.
[[nodiscard]] std::string answer_problem(const Result<HttpAnswer>& a);

}  // namespace faultline
