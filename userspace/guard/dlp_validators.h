// The confirm step of the DLP engine: each detector's structural check on the
// bytes around a Hyperscan hit (checksums, Luhn, number ranges, a JWT header
// that is JSON with "alg", a whole PEM block, a real top-level domain).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/result.h"

namespace faultline {

// What the engine looks for (docs/detectors.md). The names are the
// `dlp_type` values of rules and of the dlp_findings fact.
enum class DlpType : uint8_t {
  aws_access_key,
  anthropic_key,
  openai_key,
  github_token,
  npm_token,
  slack_token,
  google_api_key,
  jwt,
  private_key,
  credit_card,
  us_ssn,
  email,
};
inline constexpr size_t kDlpTypeCount = 12;

[[nodiscard]] std::string_view dlp_type_name(DlpType t);
[[nodiscard]] std::optional<DlpType> dlp_type_from_name(std::string_view name);
[[nodiscard]] const std::vector<DlpType>& all_dlp_types();

// The pure checks, for the confirm step and the tests.
[[nodiscard]] bool luhn_valid(std::string_view digits);  // digits only
// "AAA-GG-SSSS": area 001-899 but 666, group 01-99, serial 0001-9999, not
// the numbers printed on sample cards.
[[nodiscard]] bool ssn_valid(std::string_view ssn);
// GitHub's and npm's token checksum: the last 6 characters are the CRC32 of
// the 30 before them (after the prefix), in base62, left-padded with '0'.
[[nodiscard]] bool base62_crc32_checksum_valid(std::string_view body36);
[[nodiscard]] std::string base62_crc32(std::string_view data);  // 6 characters
// A JWT's first part: base64url of a JSON object with "alg".
[[nodiscard]] bool jwt_header_valid(std::string_view b64url_header);
[[nodiscard]] std::optional<std::string> base64url_decode(std::string_view text);

// The top-level domains of Debian's public suffix list
// (/usr/share/publicsuffix/public_suffix_list.dat, package publicsuffix).
class TldSet {
 public:
  [[nodiscard]] static Result<TldSet> load(const std::string& path = kDefaultPath);
  [[nodiscard]] bool contains(std::string_view tld) const;  // case-insensitive, ASCII
  [[nodiscard]] size_t size() const { return tlds_.size(); }
  static constexpr const char* kDefaultPath = "/usr/share/publicsuffix/public_suffix_list.dat";

 private:
  std::unordered_set<std::string> tlds_;
};

// A confirmed candidate inside a window: [begin, end) of the window's bytes.
struct DlpSpan {
  size_t begin = 0;
  size_t end = 0;
};

// The confirm step of one detector: `hit_end` is where Hyperscan's match of
// the detector's anchor ended in `window`; `at_end` says the stream ends
// with the window (else a token reaching the window's end is refused: the
// caller gives windows long enough, kDlpLookahead past the hit). The span of
// the whole secret, or nothing.
[[nodiscard]] std::optional<DlpSpan> dlp_confirm(DlpType type, std::string_view window, size_t hit_end, bool at_end,
                                                 const TldSet* tlds);

// How far before and after a hit's end the confirm step may read.
inline constexpr size_t kDlpLookbehind = 160;
inline constexpr size_t kDlpLookahead = 8192;
[[nodiscard]] size_t dlp_lookahead(DlpType type);

// The type and a masked hint of a secret, never the secret: its known prefix
// and its last characters ("AKIA...MPLE (20 chars)").
[[nodiscard]] std::string dlp_hint(DlpType type, std::string_view secret);

}  // namespace faultline
