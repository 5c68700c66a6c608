// Decoys with the real shapes (the DLP detectors take them for real keys), and
// the literal spellings that find them again.
#include "userspace/guard/honeytokens.h"

#include <sys/random.h>

#include <cerrno>

#include "userspace/guard/dlp_validators.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace honeytoken_detail {

constexpr std::string_view kHoneyBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
constexpr std::string_view kHoneyBase62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
constexpr std::string_view kHoneyBase64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kHoneyKeyChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

Result<std::string> honey_random(std::string_view alphabet, size_t n) {
  std::string out;
  while (out.size() < n) {
    unsigned char buf[64];
    const ssize_t got = ::getrandom(buf, sizeof buf, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return make_error(errno, "getrandom");
    }
    // Rejection sampling: no bias toward the alphabet's first characters.
    const unsigned limit = 256 - 256 % alphabet.size();
    for (ssize_t i = 0; i < got && out.size() < n; ++i)
      if (buf[i] < limit) out.push_back(alphabet[buf[i] % alphabet.size()]);
  }
  return out;
}

std::string honey_base64(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = uint32_t(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out.push_back(kHoneyBase64[(v >> 18) & 63]);
    out.push_back(kHoneyBase64[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kHoneyBase64[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kHoneyBase64[v & 63] : '=');
  }
  return out;
}

}  // namespace honeytoken_detail

using namespace honeytoken_detail;

std::vector<std::string> base64_cores(std::string_view bytes) {
  std::vector<std::string> out;
  if (bytes.empty()) return out;
  for (size_t k = 0; k < 3; ++k) {
    const std::string enc = honey_base64(std::string(k, '\0') + std::string(bytes));
    // Character c holds bits [6c, 6c+6); the bytes hold bits [8k, 8(k+n)).
    const size_t first = (8 * k + 5) / 6;
    const size_t end_bits = 8 * (k + bytes.size());
    if (end_bits < 6) continue;
    const size_t last = (end_bits - 6) / 6;  // inclusive
    if (last < first) continue;
    out.push_back(enc.substr(first, last - first + 1));
  }
  return out;
}

Result<HoneytokenSet> HoneytokenSet::generate() {
  HoneytokenSet s;
  auto key_id = honey_random(kHoneyBase32, 16);
  auto secret = honey_random(kHoneyBase64, 40);
  auto gh = honey_random(kHoneyBase62, 30);
  auto ant = honey_random(kHoneyKeyChars, 93);
  for (auto* r : {&key_id, &secret, &gh, &ant})
    if (!*r) return r->error();
  s.tokens_ = {{"aws_access_key", "AKIA" + *key_id},
               {"aws_secret_key", *secret},
               {"github_token", "ghp_" + *gh + base62_crc32(*gh)},
               {"anthropic_key", "sk-ant-api03-" + *ant + "AA"}};
  return s;
}

const std::string& HoneytokenSet::value(std::string_view kind) const {
  static const std::string kNone;
  for (const Honeytoken& t : tokens_)
    if (t.kind == kind) return t.value;
  return kNone;
}

std::vector<ContentRule> HoneytokenSet::content_rules() const {
  std::vector<ContentRule> out;
  auto add = [&](const Honeytoken& t, std::string pattern) {
    for (const ContentRule& r : out)
      if (r.pattern == pattern) return;
    ContentRule r;
    r.label = std::string(kLabelPrefix) + t.kind;
    r.pattern = std::move(pattern);
    r.file = "--honeytokens";
    out.push_back(std::move(r));
  };
  for (const Honeytoken& t : tokens_) {
    add(t, t.value);
    for (std::string core : base64_cores(t.value)) {
      if (core.size() < 12) continue;  // too short to be this decoy's alone
      add(t, core);
      for (char& c : core) c = c == '+' ? '-' : c == '/' ? '_' : c;
      add(t, core);
    }
  }
  return out;
}

std::string HoneytokenSet::aws_credentials_file() const {
  return "[default]\naws_access_key_id = " + value("aws_access_key") +
         "\naws_secret_access_key = " + value("aws_secret_key") + "\n";
}

std::string_view honeytoken_kind(std::string_view label) {
  if (!label.starts_with(HoneytokenSet::kLabelPrefix)) return {};
  return label.substr(HoneytokenSet::kLabelPrefix.size());
}

}  // namespace faultline
