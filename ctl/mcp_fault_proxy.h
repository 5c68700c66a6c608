// `faultctl mcp-guard --fault-tool T`: faults in the calls the guard lets
// through (an error result instead of the server's, or a delay before the
// call is sent), never in its decisions: the kill switches (FAULTLINE_DISABLED,
// the kill file) end the faults within a second and leave the gate as it is.
// And `--trace FILE`: every message the guard passes, both ways, redacted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"

namespace faultline {

struct McpFaultSpec {
  std::string tool;        // glob; "" for no fault
  std::string error_text;  // --fault-error: the call answered isError with this text
  uint64_t delay_ns = 0;   // --fault-delay: the call sent this much later
  double pct = 100;        // --fault-pct: the share of matching calls faulted
};

class McpFaultProxy {
 public:
  using Send = std::function<void(const std::string&)>;
  McpFaultProxy(McpFaultSpec spec, Send log);
  ~McpFaultProxy();  // what is delayed is sent now
  McpFaultProxy(const McpFaultProxy&) = delete;
  McpFaultProxy& operator=(const McpFaultProxy&) = delete;

  // A line the gate sends to the server: sent now, sent after the delay, or
  // answered with the error (to_client) and not sent.
  void to_server(const std::string& line, const Send& send, const Send& to_client);
  [[nodiscard]] uint64_t faulted() const { return faulted_.load(); }

 private:
  // Why faults are off now (FAULTLINE_DISABLED, the kill file), or "".
  [[nodiscard]] std::string stopped();
  McpFaultSpec spec_;
  Send log_;
  std::mutex mu_;
  std::mt19937_64 rng_;
  std::string last_stop_;  // the reason last said, said once each time it changes
  std::atomic<uint64_t> faulted_{0};
  std::atomic<bool> ending_{false};
  struct Delayed {
    std::thread t;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Delayed> delayed_;
};

// Appends one redacted JSON line per message to FILE:
// {"ts_ms":..., "to":"server"|"client", "message":...}. Members named like
// secrets (Redactor::secret_name) become "[REDACTED]", strings pass
// base/redact's rules; a line that is not JSON is kept as redacted text.
class McpTrace {
 public:
  [[nodiscard]] static Result<std::unique_ptr<McpTrace>> open(const std::string& path);
  ~McpTrace();
  void record(const char* to, const std::string& line);

 private:
  McpTrace() = default;
  std::mutex mu_;
  int fd_ = -1;
};

}  // namespace faultline
