// libFuzzer target: the forward proxy's request target (absolute-form URLs,
// CONNECT authorities) and its origin-form rewrite of a head. The input is
// "M URL<0xff>HEAD": the first byte picks CONNECT (odd) or GET (even), the
// rest up to the first 0xff is the target, what follows a head to rewrite.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/proxy/proxy_request.h"

namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view method = (data[0] & 1) != 0 ? "CONNECT" : "GET";
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t sep = rest.find('\xff');
  const std::string_view url = rest.substr(0, sep);
  auto t = faultline::parse_proxy_target(method, url);
  if (t.ok()) {
    if (t->host.empty() || t->port == 0) __builtin_trap();
    if (method == "CONNECT" && (t->scheme != "https" || !t->origin.empty())) __builtin_trap();
    if (method == "GET" && (t->scheme != "http" || t->origin.empty() || t->origin[0] != '/')) __builtin_trap();
    // What the proxy names the upstream by reads back as the same host and port.
    auto again = faultline::parse_proxy_target("CONNECT", t->authority());
    if (!again.ok() || again->host != t->host || again->port != t->port) __builtin_trap();
  } else if (t.error().message.empty()) {
    __builtin_trap();  // a 400 names what is wrong
  }
  if (sep == std::string_view::npos) return 0;
  const std::string_view head = rest.substr(sep + 1);
  const std::string out = faultline::origin_form_head(head, t.ok() && !t->origin.empty() ? t->origin : "/");
  // Ends with the one Connection field the proxy writes (Upgrade only for an upgrade).
  const std::string_view up = "Connection: Upgrade\r\n\r";
  const bool upgrade = out.size() >= up.size() && out.compare(out.size() - up.size(), up.size(), up) == 0;
  const std::string_view tail = upgrade ? up : "Connection: close\r\n\r";
  if (out.size() < tail.size() || out.compare(out.size() - tail.size(), tail.size(), tail) != 0) __builtin_trap();
  // No proxy credentials or proxy hop fields reach the upstream.
  for (size_t at = out.find("\r\n"); at != std::string::npos; at = out.find("\r\n", at + 2)) {
    const std::string_view line = std::string_view(out).substr(at + 2);
    if (starts_with_nocase(line, "proxy-authorization:") || starts_with_nocase(line, "proxy-connection:"))
      __builtin_trap();
  }
  return 0;
}
