// VCR-style record and replay of LLM calls (faultctl guard --replay DIR, and
// the in-memory --cache): a call's key, its answer as the upstream sent it,
// and the store it is kept in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace faultline {

// Lowercase hex SHA-256 of "METHOD\nTARGET\n" and the body normalised: a JSON
// body re-serialised by nlohmann::json (keys sorted, no spaces, numbers as
// parsed), any other body as is. The host is not in it.
[[nodiscard]] std::string llm_replay_key(std::string_view method, std::string_view target, std::string_view body);

// --cache-mode similar: a call may be answered with the cached answer of
// another call whose prompt is close enough. Only the prompt may differ: the
// scope (method, target, and every other field of the JSON body: model,
// max_tokens, temperature, stream, tools, ...) must be equal. The prompt is
// every string value under the body's top-level "system", "messages",
// "input", "prompt" and "instructions", in order, joined by newlines, then
// normalised: ASCII letters lowercased, every other ASCII byte that is not a
// letter or digit made a space, runs of spaces made one, the ends trimmed
// (other bytes, UTF-8 beyond ASCII, kept). Its profile counts the
// normalised text's character trigrams (the text padded with a space at each
// end); two prompts' similarity is the cosine of their count vectors, 1 for
// the same text, 0 for no trigram in common.
struct PromptProfile {
  std::unordered_map<std::string, uint32_t> grams;
  double norm = 0;  // the vector's length
};
struct SimilarityInput {
  std::string scope;  // method, target and the body without its prompt fields (keys sorted)
  PromptProfile profile;
};
[[nodiscard]] std::string normalise_prompt(std::string_view text);
[[nodiscard]] PromptProfile prompt_profile(std::string_view normalised);
[[nodiscard]] double prompt_similarity(const PromptProfile& a, const PromptProfile& b);
// None when the body is not a JSON object or holds no prompt text.
[[nodiscard]] std::optional<SimilarityInput> llm_similarity_input(std::string_view method, std::string_view target,
                                                                  std::string_view body);

// One piece of a recorded answer and when it arrived (ms after the call was forwarded).
struct ReplayChunk {
  uint64_t at_ms = 0;
  std::string bytes;
};

// An answer as the upstream sent it: status line, headers, body with its
// framing (chunked kept), in the pieces it arrived in.
struct ReplayRecording {
  std::string key;
  std::string method;
  std::string target;
  std::vector<ReplayChunk> chunks;
  // --cache-mode similar: the call's scope and prompt profile (memory only,
  // never written to a file).
  std::optional<SimilarityInput> similar;
  [[nodiscard]] std::string bytes() const;
};

// Whether a recorded answer is an event stream (its head's Content-Type is
// text/event-stream): such a recording is replayed with its timing.
[[nodiscard]] bool replay_is_event_stream(const ReplayRecording& r);

// Whether raw response bytes are a whole 2xx answer worth recording: the head
// ended, and the body reached its Content-Length or its last chunk (a body
// ended by the connection's close is taken whole).
[[nodiscard]] bool replay_answer_complete(std::string_view raw);

// The file's text ({"key","method","target","chunks":[{"at_ms","text"|"hex"}]})
// and back: a piece that is valid UTF-8 is kept as text, else as hex.
[[nodiscard]] std::string replay_recording_json(const ReplayRecording& r);
[[nodiscard]] Result<ReplayRecording> parse_replay_recording(std::string_view text);

// --replay: DIR/<key>.json, read on first use and kept in memory, written
// atomically, never expiring. --cache: memory only, each answer kept `ttl`
// after it was stored, at most kMaxCached answers (the one expiring first
// goes to make room).
class ReplayStore {
 public:
  static constexpr size_t kMaxCached = 1024;
  explicit ReplayStore(std::string dir) : dir_(std::move(dir)) {}
  explicit ReplayStore(std::chrono::milliseconds ttl) : ttl_(ttl) {}
  [[nodiscard]] bool memory_only() const { return dir_.empty(); }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] std::chrono::milliseconds ttl() const { return ttl_; }
  [[nodiscard]] std::string path_for(std::string_view key) const;
  // Nothing when the key has no recording (or its time is up); an error for
  // a file that cannot be read.
  [[nodiscard]] Result<std::optional<ReplayRecording>> find(const std::string& key);
  [[nodiscard]] Status save(ReplayRecording r);

  // --cache-mode similar --cache-threshold T (0 < T <= 1): find_similar()
  // answers with the kept answer of the same scope whose prompt is most
  // similar, when that similarity is at least T. Memory only.
  void set_similar(double threshold) { similar_threshold_ = threshold; }
  [[nodiscard]] std::optional<double> similar_threshold() const { return similar_threshold_; }
  struct SimilarHit {
    ReplayRecording recording;
    double score = 0;
  };
  [[nodiscard]] std::optional<SimilarHit> find_similar(const SimilarityInput& in);

 private:
  struct Kept {
    ReplayRecording recording;
    std::chrono::steady_clock::time_point expires;  // max(): never (a folder's)
  };
  std::string dir_;
  std::chrono::milliseconds ttl_{0};
  std::optional<double> similar_threshold_;
  std::mutex mu_;
  std::map<std::string, Kept> loaded_;
};

}  // namespace faultline
