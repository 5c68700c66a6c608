// Each detector's precision and recall, measured: positives with valid
// structure made now, inside the shapes requests really have (the model SDKs'
// JSON, multipart, a form), and negatives that look alike (UUIDs, git SHAs,
// base64 blobs, Luhn-invalid digits, vendors' example keys, public keys and
// certificates, text of installed Debian packages). The figures are printed
// (docs/detectors.md quotes them); each must be at least 0.98.
#include <gtest/gtest.h>
#include <openssl/rand.h>

#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>

#include "selftests/lib/dlp_samples.h"
#include "userspace/guard/dlp_engine.h"

namespace faultline {
namespace {

namespace samples = dlp_samples;

std::string percent(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    }
  }
  return out;
}

// The request shapes a secret travels in.
std::string shape(int kind, const std::string& text) {
  switch (kind) {
    case 0:  // Anthropic's Messages API, as its SDK sends it
      return nlohmann::json{
          {"model", "claude-sonnet-4"}, {"max_tokens", 1024}, {"messages", {{{"role", "user"}, {"content", text}}}}}
          .dump();
    case 1:  // OpenAI's chat completions
      return nlohmann::json{
          {"model", "gpt-4o"},
          {"messages", {{{"role", "system"}, {"content", "You are helpful."}}, {{"role", "user"}, {"content", text}}}},
          {"stream", true}}
          .dump();
    case 2:  // multipart/form-data
      return "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\nContent-Type: "
             "text/plain\r\n\r\n" +
             text + "\r\n--XyZ--\r\n";
    default:  // application/x-www-form-urlencoded
      return "note=" + percent(text) + "&page=2";
  }
}

std::string random_base64(size_t bytes) {
  std::string raw(bytes, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  std::string b = samples::b64url_encode(raw);
  for (char& c : b) c = c == '-' ? '+' : c == '_' ? '/' : c;
  return b;
}

// Look-alikes of each detector, made now.
std::vector<std::string> look_alikes(std::mt19937_64& rng) {
  std::vector<std::string> v;
  for (int i = 0; i < 40; ++i) {
    v.push_back("AKIA" + samples::pick(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 9) + "EXAMPLE");  // vendor docs
    v.push_back("AKIA" + samples::pick(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 12));                   // too short
    v.push_back("sk-ant-" + samples::pick(rng, samples::kB64url, 20));
    v.push_back("sk-proj-" + samples::pick(rng, samples::kB64url, 120));  // no T3BlbkFJ
    v.push_back("ghp_" + samples::pick(rng, samples::kBase62, 36));       // checksum wrong (1 in 62^6 right)
    v.push_back("npm_" + samples::pick(rng, samples::kBase62, 36));
    v.push_back("xoxb-not-a-token-" + samples::pick(rng, samples::kBase62, 10));
    v.push_back("AIza" + samples::pick(rng, samples::kB64url, 20));
    v.push_back("eyJ" + samples::pick(rng, samples::kB64url, 40) + "." + samples::pick(rng, samples::kB64url, 40) +
                "." + samples::pick(rng, samples::kB64url, 20));
    v.push_back(samples::b64url_encode("{\"typ\":\"JWT\"}") + "." + samples::b64url_encode("{\"a\":1}") + ".sig");
    std::string digits = samples::card(rng);
    digits.back() = digits.back() == '9' ? '0' : static_cast<char>(digits.back() + 1);  // Luhn broken
    v.push_back(digits);
    std::string order = samples::pick(rng, "0123456789", 16);  // an order number: Luhn-invalid
    if (luhn_valid(order)) order.back() = order.back() == '9' ? '0' : static_cast<char>(order.back() + 1);
    v.push_back(order);
    v.push_back(std::to_string(900 + rng() % 100) + "-" + std::to_string(10 + rng() % 90) + "-" +
                std::to_string(1000 + rng() % 9000));  // 9xx: never an SSN
    v.push_back("000-" + std::to_string(10 + rng() % 90) + "-1234");
    v.push_back("user" + std::to_string(i) + "@localhost");
    v.push_back("lodash@4.17." + std::to_string(i));
    v.push_back("@" + samples::pick(rng, "abcdefghij", 6) + "/core");
    v.push_back("admin@" + samples::pick(rng, "abcdefghij", 6) + ".internal");
    char uuid[40];
    std::snprintf(uuid, sizeof uuid, "%08llx-%04llx-4%03llx-a%03llx-%012llx", (unsigned long long)(rng() & 0xffffffff),
                  (unsigned long long)(rng() & 0xffff), (unsigned long long)(rng() & 0xfff),
                  (unsigned long long)(rng() & 0xfff), (unsigned long long)(rng() & 0xffffffffffffULL));
    v.push_back(uuid);
    v.push_back(samples::pick(rng, "0123456789abcdef", 40));  // a git SHA
    v.push_back(random_base64(300));
  }
  // Public keys and certificates: PEM blocks that are not private.
  for (const auto& entry : std::filesystem::directory_iterator("/etc/ssl/certs")) {
    if (v.size() > 1000) break;
    if (entry.path().extension() != ".pem") continue;
    std::ifstream in(entry.path());
    v.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return v;
}

// Text of installed Debian packages: licences, and C headers.
std::vector<std::string> debian_text() {
  std::vector<std::string> v;
  size_t total = 0;
  for (const char* dir : {"/usr/share/common-licenses", "/usr/include/linux", "/usr/include/openssl"}) {
    if (!std::filesystem::is_directory(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (total > 4'000'000) break;
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      v.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      total += v.back().size();
    }
  }
  return v;
}

// A miss or a false finding, printed (the first 20) for the reader of the figures.
void note(const std::string& what) {
  static int printed = 0;
  if (printed++ < 20) std::printf("  %s\n", what.substr(0, 300).c_str());
}

struct Tally {
  int tp = 0, fn = 0, fp = 0;
  [[nodiscard]] double precision() const { return tp + fp == 0 ? 1.0 : double(tp) / (tp + fp); }
  [[nodiscard]] double recall() const { return tp + fn == 0 ? 1.0 : double(tp) / (tp + fn); }
};

TEST(DlpPrecision, EachDetectorAtLeast098) {
  DlpEngine::Options o;
  o.types = all_dlp_types();
  auto engine = DlpEngine::build(o);
  ASSERT_TRUE(engine.ok()) << engine.error().describe();
  std::mt19937_64 rng(1234);
  std::map<DlpType, Tally> t;
  constexpr int kPerDetector = 200;
  const std::vector<std::string> fillers = {"Please summarise this config: ", "Here is the log line -> ",
                                            "debug output follows\n", "value="};
  for (DlpType type : all_dlp_types()) {
    for (int i = 0; i < kPerDetector; ++i) {
      const std::string secret = samples::make(type, rng);
      const std::string text = fillers[i % fillers.size()] + secret + (i % 2 ? " thanks." : "\nend");
      const std::string body = shape(i % 4, text);
      bool found = false;
      for (const DlpFinding& f : dlp_scan(*engine, body)) {
        if (f.type == type && !found) {
          found = true;
          ++t[type].tp;
        } else if (f.type) {
          ++t[*f.type].fp;  // something else, or a second finding of one secret
        }
      }
      if (!found) {
        ++t[type].fn;
        note(std::string(dlp_type_name(type)) + " missed in shape " + std::to_string(i % 4) + ": " + body);
      }
    }
  }
  for (const std::string& n : look_alikes(rng))
    for (int k = 0; k < 4; ++k)
      for (const DlpFinding& f : dlp_scan(*engine, shape(k, "see " + n + " here")))
        if (f.type) {
          ++t[*f.type].fp;
          note(std::string(dlp_type_name(*f.type)) + " on a look-alike: " + n);
        }
  // Debian's text: every finding but an email (those are real addresses) is false.
  size_t debian_bytes = 0;
  for (const std::string& text : debian_text()) {
    debian_bytes += text.size();
    for (const DlpFinding& f : dlp_scan(*engine, text))
      if (f.type && *f.type != DlpType::email) {
        ++t[*f.type].fp;
        note(std::string(dlp_type_name(*f.type)) + " in Debian text: " + text.substr(f.begin, f.end - f.begin));
      }
  }
  std::printf("DLP detectors: %d positives each (4 request shapes), look-alikes x4 shapes, %zu bytes of Debian text\n",
              kPerDetector, debian_bytes);
  std::printf("%-16s %6s %6s %6s %10s %8s\n", "detector", "tp", "fn", "fp", "precision", "recall");
  for (DlpType type : all_dlp_types()) {
    const Tally& x = t[type];
    std::printf("%-16s %6d %6d %6d %10.3f %8.3f\n", std::string(dlp_type_name(type)).c_str(), x.tp, x.fn, x.fp,
                x.precision(), x.recall());
    EXPECT_GE(x.precision(), 0.98) << dlp_type_name(type);
    EXPECT_GE(x.recall(), 0.98) << dlp_type_name(type);
  }
}

}  // namespace
}  // namespace faultline
