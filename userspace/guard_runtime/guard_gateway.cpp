// Gateway credentials (flags, or faultd's tokens file): parsed once at start, checked per request on a relay
// worker (no allocation beyond the decoded Basic value, no lock).
#include "userspace/guard_runtime/guard_gateway.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/unique_fd.h"

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

Result<GatewayToken> parse_gateway_token(const std::string& text, const std::string& where) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return input_error(EINVAL, where + " " + text + ": expected ID=TOKEN (e.g. ci-runner=3f9c...)");
  GatewayToken t{text.substr(0, eq), text.substr(eq + 1)};
  if (t.token.size() < 8)
    return input_error(EINVAL, where + " " + t.identity + "=...: the token is shorter than 8 characters");
  for (char ch : t.token)
    if (std::isspace(static_cast<unsigned char>(ch)) || ch == ':')
      return input_error(EINVAL, where + " " + t.identity + "=...: a token has no spaces or ':'");
  return t;
}

Result<std::vector<GatewayToken>> read_gateway_tokens_file(const std::string& file, const std::string& flag) {
  const std::string where = flag + " " + file;
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return input_error(errno, where + ": cannot be opened: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return input_error(errno, where + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return input_error(EINVAL, where + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    return input_error(EPERM, where + ": mode " + mode + " lets group or others read the tokens: chmod 600 " + file);
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) return input_error(errno, where + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, size_t(n));
    if (text.size() > 1024 * 1024) return input_error(EFBIG, where + ": larger than 1 MiB");
  }
  std::vector<GatewayToken> out;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    size_t first = 0;
    while (first < line.size() && std::isspace(static_cast<unsigned char>(line[first]))) ++first;
    line.erase(0, first);
    if (line.empty() || line[0] == '#') continue;
    auto t = parse_gateway_token(line, where + ":" + std::to_string(line_no) + ":");
    if (!t) return t.error();
    for (const GatewayToken& seen : out)
      if (seen.identity == t->identity)
        return input_error(EINVAL,
                           where + ":" + std::to_string(line_no) + ": the identity " + t->identity + " is given twice");
    out.push_back(std::move(*t));
  }
  if (out.empty()) return input_error(EINVAL, where + ": no ID=TOKEN line: a gateway needs at least one token");
  return out;
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
