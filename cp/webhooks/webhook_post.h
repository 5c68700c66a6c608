// One outbound HTTP POST for a webhook, blocking with a deadline (run on the
// sender's thread, never the serving one): http:// or https:// (OpenSSL,
// the system's CA store, the host name checked). Only the status code of the
// answer is read.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace faultline::cp {

struct WebhookUrl {
  bool tls = false;
  std::string host;  // a name, an IPv4 address, or an IPv6 one without brackets
  uint16_t port = 0;
  std::string path;  // "/" at least, with the query
};

// Accepts http://HOST[:PORT][/PATH] and https://...; no user info, no fragment,
// at most 2048 characters. bad_input errors say what is wrong.
[[nodiscard]] Result<WebhookUrl> parse_webhook_url(const std::string& url);

// POSTs `body` (application/json) with `headers`; the status code the server
// answered, or an error (resolve, connect, TLS, timeout, no status line).
[[nodiscard]] Result<int> post_webhook(const WebhookUrl& url,
                                       const std::vector<std::pair<std::string, std::string>>& headers,
                                       const std::string& body, std::chrono::milliseconds timeout);

}  // namespace faultline::cp
