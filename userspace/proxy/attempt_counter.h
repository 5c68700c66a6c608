// Which attempt of a request this is, for an HTTP fault's `attempts`: the SDKs
// number their retries (x-stainless-retry-count), but a client that retries in
// its own loop (Claude Code) sends 0 every time, so a retry is also recognised
// by its fingerprint: the same client, method, path and body again, soon.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace faultline {

// One request as the counter recognises it. `client` is the peer's address
// without its port: a retry may come on a new connection.
struct RequestFingerprint {
  std::string client;
  std::string method;
  std::string path;
  uint64_t body_hash = 0;  // fingerprint_body() of the whole body
};

// FNV-1a, 64 bits, fed in pieces: a fingerprint, not a defence (a client that
// wants to dodge the fault can change its body anyway).
class BodyHash {
 public:
  void update(std::string_view bytes);
  [[nodiscard]] uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

// Shared by every connection of a proxy (one per fault, like its hit counter):
// the rule of docs/l7.md "Counting attempts".
class AttemptCounter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kDefaultWindow{60};

  explicit AttemptCounter(Clock::duration window = kDefaultWindow) : window_(window) {}

  // The attempt this request is (0: the first) and records it. A retry header
  // above 0 is the client's own count and is believed; 0 or no header is what a
  // first attempt and a retry from outside the SDK both send, so then the
  // number of times the same fingerprint was seen, each within `window` of the
  // one before, decides. The larger of the two wins.
  [[nodiscard]] int64_t attempt(const RequestFingerprint& fp, int64_t header_retry, Clock::time_point now);
  // The request got past the fault: its chain ends, and the same request again
  // is a new one.
  void settle(const RequestFingerprint& fp);
  [[nodiscard]] size_t tracked();

 private:
  struct Seen {
    int64_t attempts = 0;
    Clock::time_point last;
  };
  static std::string key_of(const RequestFingerprint& fp);
  void prune(Clock::time_point now);

  Clock::duration window_;
  std::mutex mu_;
  std::unordered_map<std::string, Seen> seen_;
};

}  // namespace faultline
