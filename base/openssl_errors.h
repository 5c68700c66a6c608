// OpenSSL's error queue as one line of text, for every file that calls OpenSSL
// (the proxy's TLS, the HTTP guardrail's client, the API listeners, faultcp's
// webhooks). Header-only: base itself does not link OpenSSL, its includers do.
#pragma once

#include <openssl/err.h>

#include <string>

namespace faultline {

// Drains this thread's OpenSSL error queue into "reason; reason" (empty if none).
[[nodiscard]] inline std::string take_openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason != nullptr ? reason : buf;
  }
  return out;
}

// "what: OpenSSL's reasons", or what alone when the queue is empty.
[[nodiscard]] inline std::string with_openssl_errors(const std::string& what) {
  const std::string reasons = take_openssl_errors();
  return reasons.empty() ? what : what + ": " + reasons;
}

}  // namespace faultline
