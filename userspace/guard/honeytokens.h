// --honeytokens: fresh decoy credentials made at start (an AWS key pair, a
// checksummed GitHub token, an Anthropic key) that nothing legitimate ever
// sends; their every spelling in egress (raw, JSON-escaped, URL-encoded,
// base64 at any alignment) is compiled into the DLP engine as content rules,
// so any appearance is a finding. docs/detectors.md, "Honeytokens".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/guard/content_policy.h"

namespace faultline {

struct Honeytoken {
  std::string kind;   // "aws_access_key", "aws_secret_key", "github_token", "anthropic_key"
  std::string value;  // the decoy
};

class HoneytokenSet {
 public:
  // Fresh decoys from the kernel's random source (getrandom).
  [[nodiscard]] static Result<HoneytokenSet> generate();
  // Given decoys (tests, the fuzz target).
  explicit HoneytokenSet(std::vector<Honeytoken> tokens) : tokens_(std::move(tokens)) {}

  [[nodiscard]] const std::vector<Honeytoken>& tokens() const { return tokens_; }
  [[nodiscard]] const std::string& value(std::string_view kind) const;
  // The content rules that find them: each decoy as written, and its base64
  // (standard and URL-safe) at each of the three alignments, less the edge
  // characters its neighbours change. The DLP engine's unescaped view takes
  // care of JSON escapes and %XX. Labels are kLabelPrefix + kind.
  [[nodiscard]] std::vector<ContentRule> content_rules() const;
  // An AWS shared-credentials file holding the pair under [default].
  [[nodiscard]] std::string aws_credentials_file() const;

  static constexpr std::string_view kLabelPrefix = "honeytoken.";

 private:
  HoneytokenSet() = default;
  std::vector<Honeytoken> tokens_;
};

// A content label of a honeytoken rule: its kind; else "".
[[nodiscard]] std::string_view honeytoken_kind(std::string_view label);

// The base64 spellings of `bytes` whatever precedes and follows them: for
// each of the three alignments, the characters that depend on these bytes
// alone (standard alphabet; the caller adds the URL-safe one).
[[nodiscard]] std::vector<std::string> base64_cores(std::string_view bytes);

}  // namespace faultline
