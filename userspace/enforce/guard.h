// faultctl guard: run a command in a fresh cgroup under an egress policy.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "userspace/enforce/cgroup_limits.h"
#include "userspace/net/egress_rules.h"

namespace faultline {

struct GuardOptions {
  bool enforce = false;       // else monitor: report would-be denies, block nothing
  bool default_deny = false;  // no rule matched: deny (else allow)
  std::vector<EgressRule> rules;
  // --policy FILE: the rules came from this policy (its metadata.name), and
  // each rule's text is its name there; reports say "rule NAME".
  std::string policy_name;
  std::vector<RedirectRule> redirects;  // --redirect, in order (rule N is the Nth)
  uint64_t exfil_cap = 0;               // bytes to one destination no allow rule covers
  int deny_errno = 1;                   // EPERM
  std::string json_log;                 // every decision as a JSON line, if set
  // --netns NAME|PATH|pid:N: the command runs in that network namespace; "":
  // ours. The policy follows the cgroup, so it applies there as anywhere.
  std::string netns;
  std::vector<std::string> command;
  // Variables added to (or replacing in) the command's environment: what a
  // caller that serves the command (HTTP faults under --terminate-tls) tells it.
  std::vector<std::pair<std::string, std::string>> env;
  // Run in the child right before its exec, after its environment is set
  // (the exec gate's filter); false ends the child with 127. It must not
  // allocate: the child of a threaded process.
  std::function<bool()> before_exec;
  // Run here once the child is forked, before it is let go, with its pid
  // (the exec gate starts serving: the child's own exec is judged).
  std::function<void(pid_t)> forked;
  // --max-memory, --max-pids, --max-cpu: on the command's cgroup.
  ResourceLimits limits;
  // Asked every 100 ms while the command runs: whether the fence enforces
  // now (the request guard's policy, reloaded by SIGHUP or faultcp). The
  // kernel's policy follows it within that time. Null: `enforce` throughout.
  std::function<bool()> enforce_now;
  // Run here on every turn of the wait for the command (about every 100 ms),
  // with its pid: the circuit breaker ends its process group from here. True:
  // revoke the fence now (once): every connect and send of the cgroup is
  // refused from then on, whatever the rules and redirects said.
  std::function<bool(pid_t child)> tick;
};

class Guard {
 public:
  Guard(GuardOptions opts, std::ostream& log) : opts_(std::move(opts)), log_(log) {}

  // Runs the command to its end; returns its exit code (128+signal if killed),
  // 2 if --netns names no network namespace (before anything is made), or 1
  // if the guard itself could not be set up.
  [[nodiscard]] int run();

 private:
  GuardOptions opts_;
  std::ostream& log_;
};

}  // namespace faultline
