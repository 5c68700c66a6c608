// --prompt-guard: the text of an outbound LLM prompt (system, user and
// tool_result contents), normalised (NFKC, invisible characters, confusables,
// base64 and leetspeak runs) and matched against rule families of prompt
// injection in one Hyperscan database. docs/detectors.md has the families and
// the measured figures.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"
#include "userspace/guard/llm_request_scan.h"

struct hs_database;
struct USpoofChecker;

namespace faultline {

// Where a prompt's text came from: what the operator's side wrote (system,
// user) or what a tool returned (untrusted: weaker signals suffice there).
enum class PromptSource : uint8_t { system, user, tool_result };
[[nodiscard]] std::string_view prompt_source_name(PromptSource s);

enum class InjectionFamily : uint8_t { instruction_override, role_boundary, exfiltration, credential_ask };
inline constexpr size_t kInjectionFamilyCount = 4;
[[nodiscard]] std::string_view injection_family_name(InjectionFamily f);

struct PromptSegment {
  PromptSource source = PromptSource::user;
  std::string text;
};

// The system, user and tool_result texts of a request body of `endpoint`
// (the model's own assistant turns are not read). An error when the body is
// not JSON or not an object.
[[nodiscard]] Result<std::vector<PromptSegment>> prompt_segments(LlmEndpoint endpoint, std::string_view body);

struct InjectionFinding {
  InjectionFamily family = InjectionFamily::instruction_override;
  PromptSource source = PromptSource::user;
  std::string view;  // how the text was read: "text", "base64", "leetspeak"
  bool operator==(const InjectionFinding&) const = default;
};

// What one request's scan found.
struct PromptScan {
  std::vector<InjectionFinding> findings;      // one per (family, source) at most
  size_t segments = 0;                         // texts read
  size_t cached = 0;                           // of those, seen before in the session (not rescanned)
  [[nodiscard]] std::string families() const;  // "instruction_override, exfiltration"
};

class PromptGuard {
 public:
  [[nodiscard]] static Result<std::shared_ptr<PromptGuard>> build();
  ~PromptGuard();
  PromptGuard(const PromptGuard&) = delete;
  PromptGuard& operator=(const PromptGuard&) = delete;

  // The canonical text the rules read: tag characters decoded to ASCII,
  // NFKC with case folding (which drops default-ignorable code points: zero
  // widths, joiners, BOMs), combining marks dropped, a Latin look-alike from
  // another script folded to its Latin letter, horizontal space collapsed.
  // ASCII text (most prompts) takes a path without ICU that gives the same
  // text (a test holds the two equal over every ASCII byte).
  [[nodiscard]] std::string normalize(std::string_view utf8) const;
  // normalize() through ICU whatever the text: the reference the ASCII path
  // is tested against.
  [[nodiscard]] std::string normalize_unicode(std::string_view utf8) const;
  // One text's findings (no cache): its normalised form, its leetspeak
  // reading and each base64 run's decoding.
  [[nodiscard]] std::vector<InjectionFinding> scan_text(std::string_view utf8, PromptSource source) const;
  // A request body: each segment scanned once in the guard's life (by its
  // SHA-256 and source); a segment seen before gives its earlier findings.
  [[nodiscard]] Result<PromptScan> scan_request(LlmEndpoint endpoint, std::string_view body);

 private:
  PromptGuard() = default;
  [[nodiscard]] std::vector<InjectionFinding> match(std::string_view normalized, PromptSource source,
                                                    std::string_view view) const;

  hs_database* db_ = nullptr;
  uint64_t serial_ = 0;
  // A non-ASCII code point whose confusable skeleton is ASCII letters.
  std::unordered_map<int32_t, std::string> latin_lookalikes_;
  std::mutex seen_mu_;
  std::unordered_map<std::string, std::vector<InjectionFinding>> seen_;
};

}  // namespace faultline
