// Each detector's confirm step: what a Hyperscan anchor hit must be around
// it to count as a secret. Pure functions of the window's bytes, so a finding
// never depends on how the stream was chunked.
#include "userspace/guard/dlp_validators.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

namespace faultline {
namespace dlp_validators_detail {

struct TypeName {
  DlpType type;
  std::string_view name;
};
constexpr std::array<TypeName, kDlpTypeCount> kTypeNames{{
    {DlpType::aws_access_key, "aws_access_key"},
    {DlpType::anthropic_key, "anthropic_key"},
    {DlpType::openai_key, "openai_key"},
    {DlpType::github_token, "github_token"},
    {DlpType::npm_token, "npm_token"},
    {DlpType::slack_token, "slack_token"},
    {DlpType::google_api_key, "google_api_key"},
    {DlpType::jwt, "jwt"},
    {DlpType::private_key, "private_key"},
    {DlpType::credit_card, "credit_card"},
    {DlpType::us_ssn, "us_ssn"},
    {DlpType::email, "email"},
}};

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool b64url(char c) { return alnum(c) || c == '-' || c == '_'; }
bool upper_or_digit(char c) { return (c >= 'A' && c <= 'Z') || digit(c); }

// The byte before `pos` is not one of `tok` (or there is none).
template <typename Pred>
bool boundary_before(std::string_view w, size_t pos, Pred tok) {
  return pos == 0 || !tok(w[pos - 1]);
}

// The run of `tok` bytes from `from`; nullopt when it reaches the window's
// end before the stream's (the token may go on).
template <typename Pred>
std::optional<size_t> run_end(std::string_view w, size_t from, Pred tok, bool at_end, size_t max) {
  size_t i = from;
  while (i < w.size() && tok(w[i]) && i - from <= max) ++i;
  if (i == w.size() && !at_end) return std::nullopt;
  return i;
}

// prefix (ending at hit_end) + exactly `len` bytes of `tok`, bounded on both sides.
template <typename Pred>
std::optional<DlpSpan> fixed_token(std::string_view w, size_t hit_end, size_t prefix, size_t len, bool at_end,
                                   Pred tok) {
  if (hit_end < prefix) return std::nullopt;
  const size_t begin = hit_end - prefix;
  if (!boundary_before(w, begin, tok)) return std::nullopt;
  auto end = run_end(w, hit_end, tok, at_end, len + 1);
  if (!end || *end - hit_end != len) return std::nullopt;
  return DlpSpan{begin, *end};
}

std::optional<DlpSpan> confirm_aws(std::string_view w, size_t hit_end, bool at_end) {
  auto s = fixed_token(w, hit_end, 4, 16, at_end, upper_or_digit);
  if (!s) return std::nullopt;
  // The key of AWS's own documentation (AKIAIOSFODNN7EXAMPLE) and its kin.
  if (w.substr(s->begin, s->end - s->begin).ends_with("EXAMPLE")) return std::nullopt;
  return s;
}

std::optional<DlpSpan> confirm_anthropic(std::string_view w, size_t hit_end, bool at_end) {
  if (hit_end < 7 || !boundary_before(w, hit_end - 7, b64url)) return std::nullopt;
  // sk-ant-api03-..., sk-ant-admin01-..., sk-ant-oat01-...
  size_t i = hit_end;
  while (i < w.size() && std::islower(static_cast<unsigned char>(w[i])) && i - hit_end < 6) ++i;
  if (i == hit_end || i + 3 > w.size() || !digit(w[i]) || !digit(w[i + 1]) || w[i + 2] != '-') return std::nullopt;
  const size_t body = i + 3;
  auto end = run_end(w, body, b64url, at_end, 200);
  if (!end || *end - body < 80 || *end - body > 160) return std::nullopt;
  return DlpSpan{hit_end - 7, *end};
}

std::optional<DlpSpan> confirm_openai(std::string_view w, size_t hit_end, bool at_end) {
  if (hit_end < 8 || !boundary_before(w, hit_end - 8, b64url)) return std::nullopt;
  auto end = run_end(w, hit_end, b64url, at_end, 300);
  if (!end || *end - hit_end < 40 || *end - hit_end > 250) return std::nullopt;
  // OpenAI's keys carry "T3BlbkFJ" (base64 of "OpenAI") in their middle.
  if (w.substr(hit_end, *end - hit_end).find("T3BlbkFJ") == std::string_view::npos) return std::nullopt;
  return DlpSpan{hit_end - 8, *end};
}

std::optional<DlpSpan> confirm_github(std::string_view w, size_t hit_end, bool at_end) {
  if (hit_end >= 11 && w.substr(hit_end - 11, 11) == "github_pat_") {
    // Fine-grained: 22 characters, '_', 59 characters (no published checksum).
    if (!boundary_before(w, hit_end - 11, b64url)) return std::nullopt;
    auto a = run_end(w, hit_end, alnum, at_end, 23);
    if (!a || *a - hit_end != 22 || *a >= w.size() || w[*a] != '_') return std::nullopt;
    auto b = run_end(w, *a + 1, alnum, at_end, 60);
    if (!b || *b - (*a + 1) != 59 || (*b < w.size() && b64url(w[*b]))) return std::nullopt;
    return DlpSpan{hit_end - 11, *b};
  }
  auto s = fixed_token(w, hit_end, 4, 36, at_end, alnum);
  if (!s || (s->begin > 0 && w[s->begin - 1] == '_') || (s->end < w.size() && (w[s->end] == '_' || w[s->end] == '-')))
    return std::nullopt;
  if (!base62_crc32_checksum_valid(w.substr(hit_end, 36))) return std::nullopt;
  return s;
}

std::optional<DlpSpan> confirm_npm(std::string_view w, size_t hit_end, bool at_end) {
  auto s = fixed_token(w, hit_end, 4, 36, at_end, alnum);
  if (!s || (s->begin > 0 && w[s->begin - 1] == '_')) return std::nullopt;
  if (!base62_crc32_checksum_valid(w.substr(hit_end, 36))) return std::nullopt;
  return s;
}

std::optional<DlpSpan> confirm_slack(std::string_view w, size_t hit_end, bool at_end) {
  // xoxb-<team digits>-<id digits>-<secret>; xoxp-<d>-<d>-<d>-<hex>
  if (hit_end < 5 || !boundary_before(w, hit_end - 5, b64url)) return std::nullopt;
  size_t i = hit_end;
  int numeric = 0;
  for (;;) {
    auto e = run_end(w, i, digit, at_end, 16);
    if (!e) return std::nullopt;
    if (*e - i < 6 || *e - i > 15 || *e >= w.size() || w[*e] != '-') break;
    ++numeric;
    i = *e + 1;
  }
  if (numeric < 2) return std::nullopt;
  auto end = run_end(w, i, alnum, at_end, 65);
  if (!end || *end - i < 20 || *end - i > 64) return std::nullopt;
  if (*end < w.size() && b64url(w[*end])) return std::nullopt;
  return DlpSpan{hit_end - 5, *end};
}

std::optional<DlpSpan> confirm_google(std::string_view w, size_t hit_end, bool at_end) {
  return fixed_token(w, hit_end, 4, 35, at_end, b64url);
}

bool json_object_text(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  return !j.is_discarded() && j.is_object();
}

std::optional<DlpSpan> confirm_jwt(std::string_view w, size_t hit_end, bool at_end) {
  if (hit_end < 3) return std::nullopt;
  const size_t begin = hit_end - 3;
  auto dotless = [](char c) { return b64url(c) || c == '.'; };
  if (!boundary_before(w, begin, dotless)) return std::nullopt;
  auto h = run_end(w, begin, b64url, at_end, 2048);
  if (!h || *h >= w.size() || w[*h] != '.') return std::nullopt;
  auto p = run_end(w, *h + 1, b64url, at_end, 6144);
  if (!p || *p == *h + 1 || *p >= w.size() || w[*p] != '.') return std::nullopt;
  auto s = run_end(w, *p + 1, b64url, at_end, 1024);
  if (!s || (*s < w.size() && (w[*s] == '.' || w[*s] == '='))) return std::nullopt;
  if (!jwt_header_valid(w.substr(begin, *h - begin))) return std::nullopt;
  auto payload = base64url_decode(w.substr(*h + 1, *p - *h - 1));
  if (!payload || !json_object_text(*payload)) return std::nullopt;
  return DlpSpan{begin, *s};
}

std::optional<DlpSpan> confirm_pem(std::string_view w, size_t hit_end, bool at_end) {
  // hit_end is after "-----BEGIN "; then "[WORD ]*PRIVATE KEY-----".
  (void)at_end;
  const size_t begin = hit_end - 11;
  const size_t label_end = w.find("-----", hit_end);
  if (label_end == std::string_view::npos || label_end - hit_end > 40) return std::nullopt;
  const std::string_view label = w.substr(hit_end, label_end - hit_end);
  if (!label.ends_with("PRIVATE KEY")) return std::nullopt;
  if (!std::all_of(label.begin(), label.end(), [](char c) { return upper_or_digit(c) || c == ' '; }))
    return std::nullopt;
  const size_t body = label_end + 5;
  const std::string end_line = "-----END " + std::string(label) + "-----";
  const size_t end = w.find(end_line, body);
  if (end == std::string_view::npos) return std::nullopt;
  size_t b64 = 0;
  for (size_t i = body; i < end; ++i) {
    const char c = w[i];
    if (alnum(c) || c == '+' || c == '/' || c == '=')
      ++b64;
    else if (!(c == '\n' || c == '\r' || c == ' ' || c == '\t' || c == ':' || c == ',' || c == '-'))
      return std::nullopt;
  }
  if (b64 < 64) return std::nullopt;
  return DlpSpan{begin, end + end_line.size()};
}

// The run of card characters around the hit: digits, with ' ' or '-' between groups.
std::optional<DlpSpan> confirm_card(std::string_view w, size_t hit_end, bool at_end) {
  auto card_char = [](char c) { return digit(c) || c == ' ' || c == '-'; };
  size_t begin = hit_end;
  while (begin > 0 && card_char(w[begin - 1]) && hit_end - begin < 40) --begin;
  if (begin > 0 && card_char(w[begin - 1])) return std::nullopt;  // a longer run than any card
  while (begin < hit_end && !digit(w[begin])) ++begin;
  auto end = run_end(w, hit_end, card_char, at_end, 40);
  if (!end || *end - begin > 40) return std::nullopt;
  size_t stop = *end;
  while (stop > begin && !digit(w[stop - 1])) --stop;
  if (begin > 0 && (alnum(w[begin - 1]) || w[begin - 1] == '.' || w[begin - 1] == '_')) return std::nullopt;
  if (stop < w.size() && (alnum(w[stop]) || w[stop] == '_')) return std::nullopt;
  if (stop < w.size() && w[stop] == '.' && stop + 1 < w.size() && digit(w[stop + 1])) return std::nullopt;
  // Groups: none, or one separator kind between 4-4-4-4(-1..3) or 4-6-5.
  std::string digits;
  std::vector<size_t> groups;
  char sep = 0;
  size_t g = 0;
  for (size_t i = begin; i < stop; ++i) {
    const char c = w[i];
    if (digit(c)) {
      digits += c;
      ++g;
      continue;
    }
    if ((sep && c != sep) || g == 0) return std::nullopt;
    sep = c;
    groups.push_back(g);
    g = 0;
  }
  groups.push_back(g);
  if (digits.size() < 13 || digits.size() > 19) return std::nullopt;
  if (groups.size() > 1) {
    const bool fours = groups.size() >= 4 && groups.size() <= 5 && groups[0] == 4 && groups[1] == 4 && groups[2] == 4 &&
                       groups[3] == 4 && (groups.size() == 4 || groups[4] <= 3);
    const bool amex = groups.size() == 3 && groups[0] == 4 && groups[1] == 6 && groups[2] == 5;
    if (!fours && !amex) return std::nullopt;
  }
  // The issuers' ranges and their lengths.
  const size_t n = digits.size();
  const int two = (digits[0] - '0') * 10 + (digits[1] - '0');
  const int three = two * 10 + (digits[2] - '0');
  const int four = three * 10 + (digits[3] - '0');
  const bool visa = digits[0] == '4' && (n == 13 || n == 16 || n == 19);
  const bool mastercard = n == 16 && ((two >= 51 && two <= 55) || (four >= 2221 && four <= 2720));
  const bool amex = n == 15 && (two == 34 || two == 37);
  const bool discover = n >= 16 && (four == 6011 || two == 65 || (three >= 644 && three <= 649));
  const bool jcb = n >= 16 && four >= 3528 && four <= 3589;
  const bool diners = n == 14 && (two == 36 || (three >= 300 && three <= 305));
  const bool unionpay = n >= 16 && two == 62;
  if (!(visa || mastercard || amex || discover || jcb || diners || unionpay)) return std::nullopt;
  if (!luhn_valid(digits)) return std::nullopt;
  return DlpSpan{begin, stop};
}

std::optional<DlpSpan> confirm_ssn(std::string_view w, size_t hit_end, bool at_end) {
  if (hit_end < 11) return std::nullopt;
  const size_t begin = hit_end - 11;
  auto word = [](char c) { return alnum(c) || c == '-' || c == '_'; };
  if (!boundary_before(w, begin, word)) return std::nullopt;
  if (hit_end < w.size() && word(w[hit_end])) return std::nullopt;
  if (hit_end == w.size() && !at_end) return std::nullopt;
  if (!ssn_valid(w.substr(begin, 11))) return std::nullopt;
  return DlpSpan{begin, hit_end};
}

std::optional<DlpSpan> confirm_email(std::string_view w, size_t hit_end, bool at_end, const TldSet* tlds) {
  if (!tlds) return std::nullopt;
  auto local_char = [](char c) { return alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'; };
  auto domain_char = [](char c) { return alnum(c) || c == '.' || c == '-'; };
  size_t at = hit_end;
  while (at > 0 && w[at - 1] != '@' && hit_end - at < 260) --at;
  if (at == 0 || w[at - 1] != '@') return std::nullopt;
  --at;
  size_t begin = at;
  while (begin > 0 && local_char(w[begin - 1]) && at - begin <= 64) --begin;
  if (begin == at || at - begin > 64 || (begin > 0 && local_char(w[begin - 1]))) return std::nullopt;
  while (begin < at && w[begin] == '.') ++begin;
  if (begin == at || w[at - 1] == '.') return std::nullopt;
  auto end = run_end(w, at + 1, domain_char, at_end, 253);
  if (!end) return std::nullopt;
  size_t stop = *end;
  while (stop > at + 1 && (w[stop - 1] == '.' || w[stop - 1] == '-')) --stop;
  const std::string_view domain = w.substr(at + 1, stop - at - 1);
  if (domain.empty() || domain.size() > 253) return std::nullopt;
  size_t labels = 0, from = 0;
  std::string_view last;
  for (;;) {
    const size_t dot = domain.find('.', from);
    const std::string_view label = domain.substr(from, dot == std::string_view::npos ? dot : dot - from);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return std::nullopt;
    ++labels;
    last = label;
    if (dot == std::string_view::npos) break;
    from = dot + 1;
  }
  if (labels < 2 ||
      !std::all_of(last.begin(), last.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  if (!tlds->contains(last)) return std::nullopt;
  return DlpSpan{begin, stop};
}

}  // namespace dlp_validators_detail

using namespace dlp_validators_detail;

std::string_view dlp_type_name(DlpType t) { return kTypeNames[static_cast<size_t>(t)].name; }

std::optional<DlpType> dlp_type_from_name(std::string_view name) {
  for (const TypeName& n : kTypeNames)
    if (n.name == name) return n.type;
  return std::nullopt;
}

const std::vector<DlpType>& all_dlp_types() {
  static const std::vector<DlpType> all = [] {
    std::vector<DlpType> v;
    for (const TypeName& n : kTypeNames) v.push_back(n.type);
    return v;
  }();
  return all;
}

bool luhn_valid(std::string_view digits) {
  if (digits.empty()) return false;
  int sum = 0;
  bool twice = false;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (!digit(*it)) return false;
    int d = *it - '0';
    if (twice && (d *= 2) > 9) d -= 9;
    sum += d;
    twice = !twice;
  }
  return sum % 10 == 0;
}

bool ssn_valid(std::string_view s) {
  if (s.size() != 11 || s[3] != '-' || s[6] != '-') return false;
  for (size_t i : {0, 1, 2, 4, 5, 7, 8, 9, 10})
    if (!digit(s[i])) return false;
  const int area = std::stoi(std::string(s.substr(0, 3)));
  const int group = std::stoi(std::string(s.substr(4, 2)));
  const int serial = std::stoi(std::string(s.substr(7, 4)));
  if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return false;
  // Printed on sample cards and in advertising (Woolworth's wallet card, and the SSA's).
  if (s == "078-05-1120" || s == "219-09-9999" || s == "123-45-6789") return false;
  return true;
}

std::string base62_crc32(std::string_view data) {
  static constexpr std::string_view kDigits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  uint32_t crc =
      static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
  std::string out(6, '0');
  for (size_t i = 6; i-- > 0 && crc;) {
    out[i] = kDigits[crc % 62];
    crc /= 62;
  }
  return out;
}

bool base62_crc32_checksum_valid(std::string_view body36) {
  return body36.size() == 36 && base62_crc32(body36.substr(0, 30)) == body36.substr(30);
}

std::optional<std::string> base64url_decode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (digit(c))
      v = c - '0' + 52;
    else if (c == '-' || c == '+')
      v = 62;
    else if (c == '_' || c == '/')
      v = 63;
    else if (c == '=')
      break;
    else
      return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) return std::nullopt;  // one character left over: not base64
  return out;
}

bool jwt_header_valid(std::string_view header) {
  auto text = base64url_decode(header);
  if (!text) return false;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("alg") && j["alg"].is_string();
}

Result<TldSet> TldSet::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return input_error(ENOENT, path + ": the public suffix list (Debian's publicsuffix package) cannot be read");
  TldSet set;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.starts_with("//")) continue;
    if (auto sp = line.find_first_of(" \t\r"); sp != std::string::npos) line.resize(sp);
    if (line.starts_with("!")) line.erase(0, 1);
    if (line.starts_with("*.")) line.erase(0, 2);
    if (line.empty() || line.find('.') != std::string::npos) continue;
    std::transform(line.begin(), line.end(), line.begin(), [](unsigned char c) { return std::tolower(c); });
    set.tlds_.insert(line);
  }
  if (set.tlds_.empty()) return input_error(0, path + ": no top-level domain in the public suffix list");
  return set;
}

bool TldSet::contains(std::string_view tld) const {
  std::string lower(tld);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return tlds_.contains(lower);
}

size_t dlp_lookahead(DlpType type) {
  switch (type) {
    case DlpType::jwt:
    case DlpType::private_key:
      return kDlpLookahead;
    case DlpType::email:
      return 260;
    default:
      return 320;
  }
}

std::optional<DlpSpan> dlp_confirm(DlpType type, std::string_view w, size_t hit_end, bool at_end, const TldSet* tlds) {
  switch (type) {
    case DlpType::aws_access_key:
      return confirm_aws(w, hit_end, at_end);
    case DlpType::anthropic_key:
      return confirm_anthropic(w, hit_end, at_end);
    case DlpType::openai_key:
      return confirm_openai(w, hit_end, at_end);
    case DlpType::github_token:
      return confirm_github(w, hit_end, at_end);
    case DlpType::npm_token:
      return confirm_npm(w, hit_end, at_end);
    case DlpType::slack_token:
      return confirm_slack(w, hit_end, at_end);
    case DlpType::google_api_key:
      return confirm_google(w, hit_end, at_end);
    case DlpType::jwt:
      return confirm_jwt(w, hit_end, at_end);
    case DlpType::private_key:
      return confirm_pem(w, hit_end, at_end);
    case DlpType::credit_card:
      return confirm_card(w, hit_end, at_end);
    case DlpType::us_ssn:
      return confirm_ssn(w, hit_end, at_end);
    case DlpType::email:
      return confirm_email(w, hit_end, at_end, tlds);
  }
  return std::nullopt;
}

std::string dlp_hint(DlpType type, std::string_view s) {
  const std::string n = " (" + std::to_string(s.size()) + " chars)";
  auto edge = [&](size_t head, size_t tail) {
    head = std::min(head, s.size() / 3);
    tail = std::min(tail, s.size() / 5);
    return std::string(s.substr(0, head)) + "..." + std::string(s.substr(s.size() - tail)) + n;
  };
  switch (type) {
    case DlpType::aws_access_key:
      return edge(4, 2);
    case DlpType::anthropic_key:
      return edge(7, 2);
    case DlpType::openai_key:
      return edge(8, 2);
    case DlpType::github_token:
      return edge(s.starts_with("github_pat_") ? 11 : 4, 2);
    case DlpType::npm_token:
      return edge(4, 2);
    case DlpType::slack_token:
      return edge(5, 2);
    case DlpType::google_api_key:
      return edge(4, 2);
    case DlpType::jwt:
      return edge(3, 0);
    case DlpType::private_key: {
      const size_t line = s.find("-----", 5);
      return std::string(s.substr(0, line == std::string_view::npos ? 0 : line + 5)) + "..." + n;
    }
    case DlpType::credit_card:
      return edge(0, 4);
    case DlpType::us_ssn:
      return "***-**-" + std::string(s.substr(s.size() - 4));
    case DlpType::email: {
      const size_t at = s.find('@');
      return std::string(s.substr(0, 1)) + "***" + std::string(s.substr(at == std::string_view::npos ? s.size() : at));
    }
  }
  return n;
}

}  // namespace faultline
