// The secrets of a credentials file, in this process's memory only: env
// sources read once at start (and removed from the environment the command
// inherits), file sources read at start and again every TTL. A secret that
// cannot be had is missing, and a request needing it is denied, never sent bare.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/result.h"
#include "userspace/guard/creds_file.h"

namespace faultline {

class CredentialStore {
 public:
  // Reads every secret now. `log` gets one line per secret that is missing
  // (naming the entry and its source, never a value), now and when one
  // changes between present and missing at a refresh.
  [[nodiscard]] static std::shared_ptr<CredentialStore> start(CredsFile file, std::chrono::milliseconds ttl,
                                                              std::function<void(const std::string&)> log);
  ~CredentialStore();
  CredentialStore(const CredentialStore&) = delete;
  CredentialStore& operator=(const CredentialStore&) = delete;

  // The entry for a request to host:port (a host as the proxy saw it, any
  // case): its index, or nothing when no entry names it.
  [[nodiscard]] std::optional<size_t> match(std::string_view host, uint16_t port) const;
  [[nodiscard]] const HttpCredential& entry(size_t i) const { return file_.http[i]; }
  // The header's name and value with its secret, or why it cannot be set
  // (the message names the entry and its source, never a value).
  [[nodiscard]] Result<std::pair<std::string, std::string>> header(size_t i) const;
  // Every entry's secret read again now (the TTL's work, also for tests).
  void refresh();
  [[nodiscard]] size_t missing() const;

 private:
  CredentialStore(CredsFile file, std::chrono::milliseconds ttl, std::function<void(const std::string&)> log);
  struct Held {
    std::optional<std::string> secret;
    std::string why;  // when missing
  };
  [[nodiscard]] Held read(const SecretSource& s, size_t i);
  void loop();

  CredsFile file_;
  std::chrono::milliseconds ttl_;
  std::function<void(const std::string&)> log_;
  mutable std::mutex mu_;
  std::vector<Held> held_;
  std::vector<std::optional<std::string>> env_values_;  // env sources, taken once
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// What a source is, for lines about it: "env OPENAI_API_KEY", "file /run/key",
// "literal".
[[nodiscard]] std::string secret_source_text(const SecretSource& s);

}  // namespace faultline
