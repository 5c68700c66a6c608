// The guard's activity log: one JSON line per decision, chained per identity
// by SHA-256, so an edited, deleted or reordered entry is found by
// verify_activity() (and `faultctl activity verify FILE`).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/redact.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

// An LLM call's model and billed tokens.
struct ActivityLlm {
  std::string model;
  uint64_t in = 0;         // input tokens
  uint64_t out = 0;        // output tokens
  uint64_t cache = 0;      // input tokens read from the provider's cache
  uint64_t reasoning = 0;  // output tokens spent reasoning
};

// One line of the log. The canonical line is the JSON object of every field
// but `hash`, in this order, compact (nlohmann's dump, invalid UTF-8
// replaced): {"seq","ts","identity","kind","method","host","path","verdict",
// "rule","reason" (only when not empty),"llm" (an object, or null),"prev"}.
// hash = lowercase hex SHA-256 of it; the line written is the same object
// with "hash" last. A line without "reason" (every line written before the
// field existed) hashes as it always did.
struct ActivityEntry {
  uint64_t seq = 0;      // per identity, from 1
  std::string ts;        // UTC, RFC 3339 with milliseconds ("2025-06-01T12:00:00.123Z")
  std::string identity;  // who made the request ("user@host", a token's name)
  std::string kind;      // "request" (a decision), "llm" (an LLM call's usage)
  std::string method;
  std::string host;
  std::string path;     // redacted before it is hashed
  std::string verdict;  // "allow", "deny", "approve"
  std::string rule;     // "" for the default
  // Why, when the detector that decided says more than its rule (a WebAssembly
  // plugin's reason, the DLP types of a dlp-block): secret-free (masked, and
  // redacted like path before it is hashed); "" for none, and then not written.
  std::string reason;
  std::optional<ActivityLlm> llm;
  std::string prev;  // the hash of this identity's previous entry; "" for its first
  std::string hash;
};

// The canonical line of an entry (without its hash), and its hash.
[[nodiscard]] std::string activity_canonical_line(const ActivityEntry& e);
[[nodiscard]] std::string activity_hash(const ActivityEntry& e);
// The line as written: the canonical fields and the hash.
[[nodiscard]] std::string activity_line(const ActivityEntry& e);

// The first entry of a log that breaks its chain.
struct ActivityFault {
  size_t line = 0;  // 1-based
  std::optional<uint64_t> seq;
  std::string identity;  // "" when the line does not say
  std::string problem;   // "not JSON: ...", "seq 4 where 3 was expected", "prev does not match ...", "hash mismatch"
  [[nodiscard]] std::string describe() const;  // "line 7 (identity alice, seq 4): ..."
};

// Reads a log line by line, keeping each identity's last seq and hash: the
// one check both verify_activity() and the writer's resume make.
class ActivityChain {
 public:
  // The next line (without its newline); the entry, or what is wrong with it
  // (the chain state is left as it was).
  [[nodiscard]] std::variant<ActivityEntry, ActivityFault> check_line(std::string_view line);
  // The entry the writer just wrote (its seq, prev and hash made from this
  // chain): the head moves without reading the line back. The writer's lines
  // verify by construction; activity_log_test proves each kind of entry does.
  void extend(const ActivityEntry& e);
  // The seq and hash the next entry of an identity chains to.
  [[nodiscard]] uint64_t last_seq(const std::string& identity) const;
  [[nodiscard]] std::string last_hash(const std::string& identity) const;
  [[nodiscard]] size_t entries() const { return entries_; }
  [[nodiscard]] size_t identities() const { return heads_.size(); }

 private:
  struct Head {
    uint64_t seq = 0;
    std::string hash;
  };
  std::map<std::string, Head, std::less<>> heads_;
  size_t lines_ = 0;
  size_t entries_ = 0;
};

struct ActivityVerdict {
  size_t entries = 0;
  size_t identities = 0;
  std::optional<ActivityFault> first_bad;  // nullopt: every chain is intact
  [[nodiscard]] bool intact() const { return !first_bad; }
};

// Checks every line of a log. An error (bad input) only when the file cannot
// be read; a broken chain is a verdict. What a file alone cannot show: the
// tail of a chain cut off (its last entries deleted), and lines of different
// identities reordered (each chain is still whole); faultcp's copy catches
// the first.
[[nodiscard]] Result<ActivityVerdict> verify_activity(const std::string& path);

// Appends entries to a log file, continuing each identity's chain from what
// the file already holds (a file whose chains are broken is refused: the
// writer never extends a broken chain; nor a file whose last line is torn).
//
// The writer's own thread does the work: post() hands an entry over (a queue)
// and returns; the thread assigns its seq, chains prev and hash, serialises
// and writes it, in the order the entries were posted, so a request never
// waits for the hashing or the write. Entries still queued are written before
// the writer is destroyed (nothing is lost at exit); flush() waits for them.
//
// Durability: each line is one write(2) on an O_APPEND descriptor, so lines
// from this writer are never interleaved or half-written by a process crash;
// fdatasync(2) runs every `sync_every` entries, on a second thread (the
// writing thread never waits for the disk either), and at close, so a power
// loss loses at most the entries since the last sync finished (at worst
// leaving a torn last line, which verify reports as not JSON). sync_every = 1
// asks for a sync after each entry. A failed write or background sync is
// given to on_error and returned by the next flush() or append().
// Thread-safe.
class ActivityWriter {
 public:
  struct Options {
    size_t sync_every = 64;
    Redactor redactor;  // applied to path before hashing
    // Called with each entry and its line (with the newline) once written,
    // on the writer's thread: a reporter sees every identity's lines in seq
    // order. It must be quick and must not call back into the writer.
    std::function<void(const ActivityEntry&, const std::string& line)> on_append;
    // Called on the writer's thread when an entry could not be written (or a
    // background sync failed).
    std::function<void(const Error&)> on_error;
    // post() waits while this many entries are queued (a disk slower than
    // the requests holds the requests back rather than growing without end).
    size_t queue_limit = 65536;
  };
  [[nodiscard]] static Result<ActivityWriter> open(const std::string& path, Options options);
  [[nodiscard]] static Result<ActivityWriter> open(const std::string& path) { return open(path, Options{}); }
  ActivityWriter(ActivityWriter&&) noexcept;
  ActivityWriter& operator=(ActivityWriter&&) noexcept;
  ~ActivityWriter();

  // Queues the entry for the writer's thread, which fills seq, prev and hash
  // (and ts when empty: the time of the post), redacts path and writes it.
  void post(ActivityEntry entry);
  // post(), then waits for that entry: the entry as written, or why not.
  [[nodiscard]] Result<ActivityEntry> append(ActivityEntry entry);
  // Waits until every entry posted before it is written; the first error
  // since the last flush() (a failed write or sync), if any.
  [[nodiscard]] Status flush();
  // flush(), then fdatasync(2).
  [[nodiscard]] Status sync();

 private:
  struct Core;  // the file, the chain, the queue and the threads (activity_log.cpp)
  explicit ActivityWriter(std::unique_ptr<Core> core);
  std::unique_ptr<Core> core_;
};

// Now as an entry's ts.
[[nodiscard]] std::string activity_timestamp_now();

}  // namespace faultline
