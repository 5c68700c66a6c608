// One experiment the control plane dispatched to this host: its spec read
// into the typed experiment (userspace/ops/experiment.h, the reader faultcp
// checked it with), run on its own thread under guarded_run(), its JSON lines turned into progress reports, and
// stoppable from outside (the control plane's abort or kill switch).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <variant>

#include "base/result.h"
#include "userspace/ops/experiment.h"

namespace faultline {

// How a run ended, as the control plane's events say it.
struct RemoteEnding {
  std::string type;    // completed, aborted-by-slo, failed
  std::string detail;  // why, for people
  nlohmann::json record = nlohmann::json::object();
};

class RemoteExperiment {
 public:
  struct Hooks {
    // The fault is on: its local id ("3") and its deadline (CLOCK_BOOTTIME).
    std::function<void(const std::string& fault_id, uint64_t expires_ns)> started;
    // Every JSON line of the run (started, progress, guardrail readings, ended, verdict).
    std::function<void(const nlohmann::json& line)> line;
    // The run is over (called once, on the run's thread).
    std::function<void(const RemoteEnding&)> ended;
  };

  // Starts the run on a thread of its own.
  [[nodiscard]] static std::unique_ptr<RemoteExperiment> start(int64_t id, nlohmann::json spec, std::string record_dir,
                                                               Hooks hooks);
  ~RemoteExperiment();  // stop() and join
  RemoteExperiment(const RemoteExperiment&) = delete;
  RemoteExperiment& operator=(const RemoteExperiment&) = delete;

  // Ends the fault within a tick of the run loop (100 ms); why goes in the detail.
  void stop(const std::string& why);
  [[nodiscard]] bool finished() const { return finished_.load(); }
  void join();
  [[nodiscard]] int64_t id() const { return id_; }

 private:
  RemoteExperiment(int64_t id, Hooks hooks) : id_(id), hooks_(std::move(hooks)) {}
  void run(const nlohmann::json& spec, const std::string& record_dir);

  int64_t id_;
  Hooks hooks_;
  std::mutex mu_;
  std::optional<std::string> stop_why_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
  friend class StoppableFault;
};

}  // namespace faultline
