// The default redaction rules are hand-written scanners, not regexes: they run
// on every record write and JSON line, and std::regex is slow to build and to run.
#include "base/redact.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace faultline {
namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

std::string lower(std::string_view s) {
  std::string o(s);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return o;
}

// "API_KEY" -> {api, key}; "accessToken" -> {access, token}; "db-password" -> {db, password}.
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> words;
  std::string cur;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool upper = std::isupper(static_cast<unsigned char>(c));
    bool lower_before = i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]));
    if (!std::isalnum(static_cast<unsigned char>(c)) || (upper && lower_before)) {
      if (!cur.empty()) words.push_back(lower(cur));
      cur.clear();
      if (!std::isalnum(static_cast<unsigned char>(c))) continue;
    }
    cur.push_back(c);
  }
  if (!cur.empty()) words.push_back(lower(cur));
  return words;
}

// Replaces s[from, to) with the marker; returns the index after it.
size_t redact_range(std::string& s, size_t from, size_t to) {
  s.replace(from, to - from, kRedacted);
  return from + kRedacted.size();
}

// scheme://user:password@host -> scheme://user:[REDACTED]@host
void url_credentials(std::string& s) {
  size_t at = 0;
  while ((at = s.find("://", at)) != std::string::npos) {
    size_t start = at + 3;
    size_t end = start;
    while (end < s.size() && s[end] != '/' && s[end] != '@' && !std::isspace(static_cast<unsigned char>(s[end])) &&
           s[end] != '"' && s[end] != '\'' && s[end] != '?' && s[end] != '#')
      ++end;
    if (end < s.size() && s[end] == '@') {
      size_t colon = s.find(':', start);
      if (colon != std::string::npos && colon < end && colon + 1 < end) {
        at = redact_range(s, colon + 1, end);
        continue;
      }
      if (colon == std::string::npos || colon > end) {  // a bare token as the user
        at = redact_range(s, start, end);
        continue;
      }
    }
    at = start;
  }
}

// ?token=abc&x=1 -> ?token=[REDACTED]&x=1
void query_params(std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '?' && s[i] != '&' && s[i] != ';') continue;
    size_t n = i + 1;
    while (n < s.size() && name_char(s[n])) ++n;
    if (n == i + 1 || n >= s.size() || s[n] != '=') continue;
    if (!Redactor::secret_name(std::string_view(s).substr(i + 1, n - i - 1))) continue;
    size_t v = n + 1, e = v;
    while (e < s.size() && s[e] != '&' && s[e] != '#' && s[e] != ';' &&
           !std::isspace(static_cast<unsigned char>(s[e])) && s[e] != '"' && s[e] != '\'')
      ++e;
    if (e > v) i = redact_range(s, v, e) - 1;
  }
}

// "Authorization: Bearer x", "Cookie: a=b" (a header line, up to the line's end
// or a closing quote); "Bearer x" anywhere.
void headers(std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != ':') continue;
    size_t b = i;
    while (b > 0 && name_char(s[b - 1])) --b;
    if (b == i || !Redactor::secret_name(std::string_view(s).substr(b, i - b))) continue;
    size_t v = i + 1;
    while (v < s.size() && s[v] == ' ') ++v;
    // A URL's scheme ("token:" in "https://token:...") is not a header.
    if (v < s.size() && s[v] == '/') continue;
    size_t e = v;
    while (e < s.size() && s[e] != '\n' && s[e] != '\r' && s[e] != '"' && s[e] != '\'') ++e;
    if (e > v) i = redact_range(s, v, e) - 1;
  }
  for (const char* scheme : {"Bearer ", "bearer ", "Basic ", "basic "}) {
    size_t at = 0;
    while ((at = s.find(scheme, at)) != std::string::npos) {
      size_t v = at + std::string_view(scheme).size(), e = v;
      while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e])) && s[e] != '"' && s[e] != '\'') ++e;
      at = e > v && s.compare(v, kRedacted.size(), kRedacted) != 0 ? redact_range(s, v, e) : e;
    }
  }
}

// NAME=value words (environment-style arguments, --flag=value) whose name looks secret.
void assignments(std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '=') continue;
    size_t b = i;
    while (b > 0 && name_char(s[b - 1])) --b;
    if (b == i) continue;
    if (b > 0 && (s[b - 1] == '?' || s[b - 1] == '&' || s[b - 1] == ';')) continue;  // a query parameter: done above
    if (!Redactor::secret_name(std::string_view(s).substr(b, i - b))) continue;
    size_t v = i + 1, e = v;
    const bool quoted = v < s.size() && (s[v] == '\'' || s[v] == '"');
    if (quoted) {
      const char q = s[v++];
      e = v;
      while (e < s.size() && s[e] != q) ++e;
    } else {
      while (e < s.size() && !std::isspace(static_cast<unsigned char>(s[e])) && s[e] != '"' && s[e] != '\'' &&
             s[e] != ',')
        ++e;
    }
    if (e > v && s.compare(v, kRedacted.size(), kRedacted) != 0) i = redact_range(s, v, e) - 1;
  }
}

}  // namespace

bool Redactor::secret_name(std::string_view name) {
  static const std::set<std::string> kAlone = {
      "token",       "secret",       "password",     "passwd",        "pass",   "pwd",
      "credential",  "credentials",  "auth",         "authorization", "apikey", "cookie",
      "signature",   "privatekey",   "passphrase",   "bearer",        "jwt",    "sessionid",
      "accesstoken", "refreshtoken", "clientsecret", "xapikey"};
  // "key" alone is too common a word (KEYBOARD is one word, but "sort-key" is
  // not a secret); it counts after these.
  static const std::set<std::string> kKeyQualifiers = {"api",    "access",     "private", "secret", "signing",
                                                       "master", "encryption", "client",  "license"};
  const auto words = words_of(name);
  for (size_t i = 0; i < words.size(); ++i) {
    if (kAlone.contains(words[i])) return true;
    if (words[i] == "key" && i > 0 && kKeyQualifiers.contains(words[i - 1])) return true;
    if (words[i] == "id" && i > 0 && words[i - 1] == "session") return true;
  }
  // The whole name run together ("APIKEY", "xapikey").
  std::string joined;
  for (const auto& w : words) joined += w;
  return kAlone.contains(joined) || joined == "key";
}

Result<Redactor> Redactor::make(const std::vector<std::string>& patterns, bool enabled) {
  Redactor r;
  r.enabled_ = enabled;
  for (const auto& p : patterns) {
    if (p.empty()) return input_error(EINVAL, "--redact-pattern: an empty pattern");
    try {
      r.extra_.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return input_error(EINVAL, "--redact-pattern '" + p + "': not a regular expression (" + e.what() + ")");
    }
    r.sources_.push_back(p);
  }
  return r;
}

std::string Redactor::text(std::string_view in) const {
  std::string s(in);
  if (!enabled_) return s;
  url_credentials(s);
  query_params(s);
  headers(s);
  assignments(s);
  for (const auto& re : extra_) s = std::regex_replace(s, re, std::string(kRedacted));
  return s;
}

}  // namespace faultline
