// What a fault family gives the guarded run: a plan to show, an apply, a way to
// tell whether it is still on, counters to show, and an end that always works.
// Packet, resource and syscall faults each implement it once.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "userspace/run/outcome.h"

namespace faultline {

struct FaultStart {
  std::string id;           // "3", "r7", "s2": what `faultctl abort` takes
  uint64_t expires_ns = 0;  // CLOCK_BOOTTIME; the run ends the fault then
  // A wrapped command: the fault lasts as long as the command (the kernel side
  // still stops injecting at expires_ns), and the run ends when it exits.
  bool until_command_exits = false;
  nlohmann::json event = nlohmann::json::object();  // merged into the "started" JSON line
  std::string text;                                 // the "applied" line for people
};

// An ending the fault reached by itself or was given from outside.
struct FaultEnding {
  RunOutcome outcome = RunOutcome::Completed;
  std::string detail;               // "ended from outside (faultctl abort)", "command exited 3"
  std::optional<int> command_exit;  // set when a wrapped command exited
};

struct FaultObservation {
  nlohmann::json fields = nlohmann::json::object();  // merged into progress and ended lines
  std::string text;                                  // "matched 120 dropped 36 (30.0%)"
};

class RunnableFault {
 public:
  virtual ~RunnableFault() = default;

  [[nodiscard]] virtual std::string summary() const = 0;
  // What would be applied, for --dry-run (as JSON), the record, and the dry
  // run's lines for people.
  [[nodiscard]] virtual nlohmann::json plan() const = 0;
  [[nodiscard]] virtual std::string dry_run_text() const = 0;
  // The network namespace (inode) whose traffic the fault touches: where the
  // kernel-signal guardrail counts.
  [[nodiscard]] virtual uint32_t netns_inode() const = 0;

  [[nodiscard]] virtual Result<FaultStart> apply() = 0;
  // Called every tick: an ending, or nullopt while the fault is on.
  [[nodiscard]] virtual std::optional<FaultEnding> check() = 0;
  [[nodiscard]] virtual FaultObservation observe() = 0;
  // Ends the fault now; the first thing done on a breach. Idempotent.
  [[nodiscard]] virtual Status end(std::string_view reason) = 0;
  // After end(): adds what the end did to the last observation ("reverted").
  virtual void describe_end(bool ended, FaultObservation& obs) const {
    (void)ended;
    (void)obs;
  }
  // After end(): why the fault touched nothing while it was on (a packet fault
  // that matched no packet), or nothing when it did or cannot tell. A run whose
  // fault touched nothing tested nothing, and says so loudly.
  [[nodiscard]] virtual std::optional<std::string> touched_nothing() const { return std::nullopt; }
  // A stop signal: true if the fault passed it to its wrapped command, which
  // then decides; false and the run ends the fault.
  virtual bool forward_signal(int sig) {
    (void)sig;
    return false;
  }
  // Where lines for people go: a wrapped command owns our stdout.
  [[nodiscard]] virtual bool wraps_command() const { return false; }
};

}  // namespace faultline
