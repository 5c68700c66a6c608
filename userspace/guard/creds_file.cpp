// The credentials file's reading: every field checked, an error naming the
// first one that is wrong ("FILE: credentials[1].secret: ..."), nothing kept
// of a file with one bad entry.
#include "userspace/guard/creds_file.h"

#include <cerrno>
#include <charconv>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace faultline {
namespace creds_file_impl {

using nlohmann::json;

constexpr size_t kMaxFileBytes = 1 << 20;
constexpr std::string_view kSecretReference = "${SECRET}";

Error field_error(const std::string& origin, const std::string& field, const std::string& what) {
  return input_error(EINVAL, origin + ": " + field + ": " + what);
}

// RFC 9110's token characters: a header field's name.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

bool has_control(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

// "api.openai.com", "api.openai.com:443", "127.0.0.1:8443", "[::1]:8443".
Status parse_host(const std::string& text, HttpCredential& c, const std::string& origin, const std::string& field) {
  std::string host = text;
  std::string port;
  bool port_given = false;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string::npos) return field_error(origin, field, "'" + text + "': an IPv6 address without ']'");
    const std::string rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':')
      return field_error(origin, field, "'" + text + "': after ']' only ':PORT' may follow");
    port_given = !rest.empty();
    if (port_given) port = rest.substr(1);
    host = host.substr(1, close - 1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string::npos) {
    if (host.find(':') != colon)
      return field_error(origin, field, "'" + text + "': an IPv6 address is written in brackets ([::1]:443)");
    port_given = true;
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.empty()) return field_error(origin, field, "empty host");
  for (char& ch : host) {
    const auto u = static_cast<unsigned char>(ch);
    if (u <= 0x20 || u >= 0x7f || ch == '/' || ch == '*' || ch == '@')
      return field_error(origin, field, "'" + text + "': a host is a name or an address, without a scheme or a path");
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  if (port_given) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
      return field_error(origin, field, "'" + text + "': the port is a number from 1 to 65535");
    c.port = static_cast<uint16_t>(value);
  }
  c.host = std::move(host);
  return {};
}

Status parse_secret(const json& j, SecretSource& s, const std::string& origin, const std::string& field) {
  if (!j.is_object() || j.size() != 1)
    return field_error(origin, field,
                       "one source: {\"env\": \"NAME\"}, {\"file\": \"PATH\"} or {\"literal\": \"VALUE\"}");
  const auto first = j.begin();
  const std::string key = first.key();
  const json& value = first.value();
  const std::string sub = field + "." + key;
  if (key == "kms")
    return field_error(origin, sub,
                       "KMS sources (AWS, GCP, Azure) are not built; use env, file or literal (the secret fetched "
                       "by a script into a file)");
  if (key == "control-plane" || key == "split")
    return field_error(origin, sub, "the " + key + " source is not built; use env, file or literal");
  if (key != "env" && key != "file" && key != "literal")
    return field_error(origin, sub, "unknown source (env, file or literal)");
  if (!value.is_string()) return field_error(origin, sub, "a string");
  s.ref = value.get<std::string>();
  if (key == "env") {
    s.kind = SecretKind::env;
    if (s.ref.empty()) return field_error(origin, sub, "empty variable name");
    for (const char c : s.ref)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
        return field_error(origin, sub, "'" + s.ref + "': a variable's name is letters, digits and _");
    if (s.ref.front() >= '0' && s.ref.front() <= '9')
      return field_error(origin, sub, "'" + s.ref + "': a variable's name does not start with a digit");
  } else if (key == "file") {
    s.kind = SecretKind::file;
    if (s.ref.empty() || s.ref.front() != '/') return field_error(origin, sub, "an absolute path");
    if (s.ref.find('\0') != std::string::npos) return field_error(origin, sub, "a NUL in the path");
  } else {
    s.kind = SecretKind::literal;
    // The value is never said back: it is the secret.
    if (s.ref.empty()) return field_error(origin, sub, "empty");
    if (has_control(s.ref)) return field_error(origin, sub, "a control character (a header cannot carry it)");
  }
  return {};
}

Status parse_http(const json& e, HttpCredential& c, const std::string& origin) {
  for (const auto& [key, value] : e.items())
    if (key != "host" && key != "header" && key != "value" && key != "secret")
      return field_error(origin, c.where + "." + key, "unknown field (host, header, value, secret)");
  for (const char* key : {"host", "header", "value"}) {
    if (!e.contains(key)) return field_error(origin, c.where + "." + key, "missing");
    if (!e[key].is_string()) return field_error(origin, c.where + "." + key, "a string");
  }
  if (!e.contains("secret")) return field_error(origin, c.where + ".secret", "missing");
  FL_TRY(parse_host(e["host"].get<std::string>(), c, origin, c.where + ".host"));
  c.header = e["header"].get<std::string>();
  if (!is_token(c.header)) return field_error(origin, c.where + ".header", "'" + c.header + "': not a header name");
  static constexpr std::string_view kHopByHop[] = {"host",       "content-length", "transfer-encoding",
                                                   "connection", "upgrade",        "te",
                                                   "trailer",    "keep-alive",     "proxy-authorization"};
  std::string lower = c.header;
  for (char& ch : lower)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  for (std::string_view h : kHopByHop)
    if (lower == h) return field_error(origin, c.where + ".header", "'" + c.header + "': the proxy owns that field");
  c.value = e["value"].get<std::string>();
  if (c.value.find(kSecretReference) == std::string::npos)
    return field_error(origin, c.where + ".value", "holds no ${SECRET} (where the secret goes: \"Bearer ${SECRET}\")");
  if (has_control(c.value)) return field_error(origin, c.where + ".value", "a control character");
  std::string rest = c.value;
  for (size_t at; (at = rest.find(kSecretReference)) != std::string::npos;) rest.erase(at, kSecretReference.size());
  if (rest.find("${") != std::string::npos)
    return field_error(origin, c.where + ".value", "only ${SECRET} is replaced; another ${...} is refused");
  return parse_secret(e["secret"], c.secret, origin, c.where + ".secret");
}

}  // namespace creds_file_impl

using namespace creds_file_impl;

Result<CredsFile> parse_creds_json(std::string_view text, const std::string& origin) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return input_error(EINVAL, origin + ": not JSON at byte " + std::to_string(e.byte));
  }
  if (!root.is_object()) return input_error(EINVAL, origin + ": an object {\"credentials\": [...]}");
  for (const auto& [key, value] : root.items())
    if (key != "credentials") return field_error(origin, key, "unknown field (credentials)");
  if (!root.contains("credentials")) return field_error(origin, "credentials", "missing");
  const json& list = root["credentials"];
  if (!list.is_array()) return field_error(origin, "credentials", "a list");
  if (list.empty()) return field_error(origin, "credentials", "empty");
  CredsFile out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "credentials[" + std::to_string(i) + "]";
    if (!list[i].is_object()) return field_error(origin, where, "an object");
    HttpCredential c;
    c.where = where;
    FL_TRY(parse_http(list[i], c, origin));
    for (const HttpCredential& other : out.http)
      if (other.host == c.host && other.port == c.port)
        return field_error(origin, where + ".host", "'" + c.host + "' is given already (" + other.where + ")");
    out.http.push_back(std::move(c));
  }
  return out;
}

Result<CredsFile> read_creds_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return as_bad_input(errno_error(path));
  std::string text;
  text.resize(kMaxFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) return input_error(EFBIG, path + ": over 1 MiB");
  return parse_creds_json(text, path);
}

std::string expand_secret(std::string_view value, std::string_view secret) {
  std::string out;
  for (size_t at = 0;;) {
    const size_t next = value.find(kSecretReference, at);
    if (next == std::string_view::npos) {
      out.append(value.substr(at));
      return out;
    }
    out.append(value.substr(at, next - at));
    out.append(secret);
    at = next + kSecretReference.size();
  }
}

}  // namespace faultline
