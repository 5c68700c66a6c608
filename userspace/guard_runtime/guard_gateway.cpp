// Gateway credentials: parsed once at start, checked per request on a relay
// worker (no allocation beyond the decoded Basic value, no lock).
#include "userspace/guard_runtime/guard_gateway.h"

#include <cctype>
#include <cerrno>

namespace faultline {
namespace guard_gateway_impl {

std::optional<std::string> base64_decode(std::string_view in) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    if (ch == '=') break;
    const size_t v = kAlphabet.find(ch);
    if (v == std::string_view::npos) return std::nullopt;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool same_secret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

bool iequal_word(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace guard_gateway_impl

using namespace guard_gateway_impl;

Result<GatewayToken> parse_gateway_token(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return input_error(EINVAL, "--gateway-token " + text + ": expected ID=TOKEN (e.g. ci-runner=3f9c...)");
  GatewayToken t{text.substr(0, eq), text.substr(eq + 1)};
  if (t.token.size() < 8)
    return input_error(EINVAL, "--gateway-token " + t.identity + "=...: the token is shorter than 8 characters");
  for (char ch : t.token)
    if (std::isspace(static_cast<unsigned char>(ch)) || ch == ':')
      return input_error(EINVAL, "--gateway-token " + t.identity + "=...: a token has no spaces or ':'");
  return t;
}

std::optional<std::string> gateway_identity(const std::vector<GatewayToken>& tokens, std::string_view authorization) {
  const size_t sp = authorization.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const std::string_view scheme = authorization.substr(0, sp);
  std::string_view rest = authorization.substr(sp + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);
  std::string secret;
  if (iequal_word(scheme, "bearer")) {
    secret = std::string(rest);
  } else if (iequal_word(scheme, "basic")) {
    auto plain = base64_decode(rest);
    if (!plain) return std::nullopt;
    const size_t colon = plain->find(':');
    if (colon == std::string::npos) return std::nullopt;
    secret = plain->substr(colon + 1);
  } else {
    return std::nullopt;
  }
  std::optional<std::string> who;
  for (const GatewayToken& t : tokens)
    if (same_secret(t.token, secret) && !who) who = t.identity;
  return who;
}

}  // namespace faultline
