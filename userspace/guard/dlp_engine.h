// The DLP engine: one Hyperscan database (the detectors' anchors and the
// content policy's patterns) scanned in streaming mode over an unescaped view
// (JSON's \n and \uXXXX, a form's or URL's %XX) of the bytes as they arrive, then each hit confirmed on a window
// around it (dlp_validators.h). Findings never depend on the chunking.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "userspace/guard/content_policy.h"
#include "userspace/guard/dlp_validators.h"

struct hs_database;
struct hs_stream;

namespace faultline {

// One secret (or content-policy match) in a stream. Offsets are of the raw
// bytes as fed ([begin, end)); a content-policy finding is where its match ended.
struct DlpFinding {
  std::optional<DlpType> type;  // a detector's, else a content-policy label's
  std::string label;            // the content policy's label (type unset)
  uint64_t begin = 0;
  uint64_t end = 0;
  std::string hint;  // masked: never the secret
  // "aws_access_key", or "content:LABEL"
  [[nodiscard]] std::string kind() const;
  bool operator==(const DlpFinding&) const = default;
};

class DlpEngine {
 public:
  struct Options {
    std::vector<DlpType> types;        // the detectors on (empty: none)
    std::vector<ContentRule> content;  // --content-policy
    std::string tld_path = TldSet::kDefaultPath;
  };
  // Compiles the database; a content rule Hyperscan refuses is an error
  // naming its FILE:LINE.
  [[nodiscard]] static Result<std::shared_ptr<const DlpEngine>> build(Options options);
  ~DlpEngine();
  DlpEngine(const DlpEngine&) = delete;
  DlpEngine& operator=(const DlpEngine&) = delete;

  // A pattern id's detector (nullopt: content rule `content_index(id)`).
  struct Pattern {
    std::optional<DlpType> type;
    size_t content = 0;
  };
  [[nodiscard]] const Pattern& pattern(unsigned id) const { return patterns_[id]; }
  [[nodiscard]] const std::vector<ContentRule>& content() const { return options_.content; }
  [[nodiscard]] const TldSet* tlds() const { return tlds_ ? &*tlds_ : nullptr; }
  [[nodiscard]] hs_database* database() const { return db_; }
  [[nodiscard]] bool has_detectors() const { return !options_.types.empty(); }
  [[nodiscard]] uint64_t serial() const { return serial_; }  // unique in the process

 private:
  DlpEngine() = default;
  Options options_;
  std::vector<Pattern> patterns_;
  std::optional<TldSet> tlds_;
  hs_database* db_ = nullptr;
  uint64_t serial_ = 0;
};

// One stream's scan (a URL, a header's value, a body): feed pieces in order,
// then finish(). Not thread-safe; any thread may drive it.
class DlpStream {
 public:
  explicit DlpStream(std::shared_ptr<const DlpEngine> engine);
  ~DlpStream();
  DlpStream(const DlpStream&) = delete;
  DlpStream& operator=(const DlpStream&) = delete;

  void feed(std::string_view raw);
  void finish();
  // Every finding so far, in the order confirmed.
  [[nodiscard]] const std::vector<DlpFinding>& findings() const { return findings_; }
  // The raw offset below which no finding is still to come: bytes before it
  // can go on (masked where a finding covers them).
  [[nodiscard]] uint64_t settled_raw() const;
  [[nodiscard]] uint64_t raw_fed() const { return raw_total_; }
  // The bytes the stream keeps at most (the view window), for the tests.
  [[nodiscard]] size_t held_bytes() const { return buf_.size(); }

  // Called by the Hyperscan callback.
  void on_hit(unsigned id, unsigned long long view_end);

 private:
  void push_view(std::string_view decoded, uint64_t raw_start, size_t raw_len);
  void decode(std::string_view raw);
  void scan_new();
  void confirm_ready(bool finished);
  void prune();
  [[nodiscard]] uint64_t raw_of(uint64_t view) const;

  std::shared_ptr<const DlpEngine> engine_;
  hs_stream* stream_ = nullptr;
  bool finished_ = false;
  // The JSON-unescaped view: buf_ holds view bytes from buf_base_; breaks_
  // map view offsets to raw ones where an escape changed the length.
  std::string buf_;
  uint64_t buf_base_ = 0;
  uint64_t view_total_ = 0;
  uint64_t scanned_ = 0;  // the view bytes Hyperscan has seen
  uint64_t raw_total_ = 0;
  std::vector<std::pair<uint64_t, uint64_t>> breaks_{{0, 0}};
  std::string escape_;  // an escape cut by a chunk's end
  uint64_t escape_raw_ = 0;
  struct Hit {
    unsigned id;
    uint64_t view_end;
  };
  std::vector<Hit> pending_;
  std::set<std::pair<unsigned, uint64_t>> seen_;
  std::vector<bool> content_seen_;
  std::vector<DlpFinding> findings_;
};

// --dlp-action redact: the body as it passes, each detector finding masked
// with '*' at equal length (so Content-Length holds); a byte goes on once no
// finding can still cover it, so only a window is kept back.
class DlpRedactor {
 public:
  explicit DlpRedactor(std::shared_ptr<const DlpEngine> engine) : scan_(std::move(engine)) {}
  [[nodiscard]] std::string feed(std::string_view bytes);
  [[nodiscard]] std::string finish();
  [[nodiscard]] const std::vector<DlpFinding>& findings() const { return scan_.findings(); }
  [[nodiscard]] size_t held_bytes() const { return held_.size(); }

 private:
  [[nodiscard]] std::string release(uint64_t upto);
  DlpStream scan_;
  std::string held_;  // raw bytes from held_base_ not yet sent
  uint64_t held_base_ = 0;
};

// A whole buffer's findings, fed in one piece (tests, the bench, URLs).
[[nodiscard]] std::vector<DlpFinding> dlp_scan(const std::shared_ptr<const DlpEngine>& engine, std::string_view bytes);

}  // namespace faultline
