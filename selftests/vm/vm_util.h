// Helpers for the tests that run inside the qemu guest: run a command, keep one
// in the background with its output in a file, drive fl-vmprobe processes, ping.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "selftests/lib/child_process.h"
#include "selftests/lib/test_cgroup.h"

namespace flvm {

// Where the guest's /init put the binaries (FL_VM_BIN overrides).
[[nodiscard]] std::string bin(const std::string& name);

using fltest::ChildProcess;
using fltest::CommandResult;
using fltest::Millis;
using fltest::TestCgroup;
using namespace std::chrono_literals;

// Runs argv (a path or a name on PATH) to completion; stdout and stderr together in out.
[[nodiscard]] CommandResult run(const std::vector<std::string>& argv, Millis timeout = 60s);
// argv inside network namespace /run/netns/NS.
[[nodiscard]] CommandResult run_in(const std::string& ns, const std::vector<std::string>& argv, Millis timeout = 60s);
// argv in the background; stdout and stderr together in a file, so that it never
// blocks on a pipe nobody reads. Killed when the ChildProcess dies.
[[nodiscard]] ChildProcess start(const std::vector<std::string>& argv);

// An fl-vmprobe `serve` process: one operation per call, answered with OK or an
// errno name; "EOF" when the process went away (an exec that succeeded).
class Probe {
 public:
  // cgroup: a directory under the cgroup2 mount the probe joins before it starts; "" = ours.
  explicit Probe(const std::string& cgroup = "");
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  ~Probe();

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string call(const std::string& op, Millis timeout = 20s);

 private:
  pid_t pid_ = -1;
  int sock_ = -1;
};

// ping from NS: per-echo RTTs in ms and the share lost (percent).
struct PingResult {
  std::vector<double> rtt_ms;
  int sent = 0;
  int received = 0;
  double loss() const { return sent > 0 ? 100.0 * (sent - received) / sent : -1; }
  std::string raw;
};
[[nodiscard]] PingResult ping(const std::string& ns, const std::string& addr, int count, const std::string& interval);

[[nodiscard]] double mean(const std::vector<double>& v);
[[nodiscard]] double stddev(const std::vector<double>& v);
// The q-th percentile (0-100), nearest rank.
[[nodiscard]] double percentile(std::vector<double> v, double q);

// `faultctl features --json` in this guest, probed once.
[[nodiscard]] const nlohmann::json& features();
// A probe's verdict and detail: {available, detail}; absent probes are unavailable.
[[nodiscard]] bool probe_available(const std::string& probe);
[[nodiscard]] std::string probe_detail(const std::string& probe);
// The mechanism faultctl chose for a capability ("" when none).
[[nodiscard]] std::string capability_uses(const std::string& capability);

// Marks the running test "not applicable here" with the reason from the probe:
// a line `vmtest-na: Suite.Test: WHY` the host's report reads, then GTEST_SKIP.
void announce_not_applicable(const std::string& why);
#define FLVM_NOT_APPLICABLE(why)                           \
  do {                                                     \
    const std::string fl_na_why_ = (why);                  \
    ::flvm::announce_not_applicable(fl_na_why_);           \
    GTEST_SKIP() << "not applicable here: " << fl_na_why_; \
  } while (0)
// Not applicable unless the probe says yes.
#define FLVM_REQUIRE_PROBE(probe)                                                               \
  do {                                                                                          \
    if (!::flvm::probe_available(probe))                                                        \
      FLVM_NOT_APPLICABLE(std::string(probe) + " unavailable: " + ::flvm::probe_detail(probe)); \
  } while (0)

void write_file(const std::string& path, const std::string& text);
[[nodiscard]] std::string read_file(const std::string& path);

}  // namespace flvm
