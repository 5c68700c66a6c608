// `faultctl guard` flags -> GuardOptions, with one-line errors naming the flag.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/guard_faults.h"
#include "ctl/guard_fs.h"
#include "ctl/guard_integrity.h"
#include "ctl/guard_pg_gate.h"
#include "ctl/help.h"
#include "userspace/enforce/guard.h"
#include "userspace/guard/fs_gate.h"
#include "userspace/guard_runtime/guard_capture.h"

namespace faultline {

// The guard, and the HTTP faults its command's requests meet (--fault-*,
// --faults FILE): composed here, in ctl/, because the guard (enforce) may not
// use the proxy (ctl/commands/guard.cpp runs both).
struct GuardArgs {
  GuardOptions guard;  // the kernel's side: the cgroup, CIDR rules, redirects (root)
  GuardFaults faults;
  // The request guard (issue 26): the proxy the command is pointed at, judged
  // by host, path and method. Always as a user; as root when a request rule,
  // --approve, --identity, --terminate-tls without faults, --approve-timeout,
  // --no-proxy-loopback or a policy's guard section asks for it.
  bool requests = false;
  GuardCaptureOptions capture;
  // --block-dangerous: every exec of the command judged by the command risk
  // predicate (userspace/guard/exec_gate.h); refused when enforcing.
  bool block_dangerous = false;
  // --approve-dangerous: such an exec is held for approval instead (enforcing).
  bool approve_dangerous = false;
  // --approve-prompt: where a held exec is also asked. Auto: on the
  // terminal when faultctl runs in its foreground; tty: there, or exit 2;
  // off: the approval queue only.
  enum class ApprovePrompt : uint8_t { Auto, Tty, Off } approve_prompt = ApprovePrompt::Auto;
  GuardFsWatchOptions watch_fs;  // --watch-fs, --watch-path
  // --enforce-fs (root): every open and exec judged by the file gate
  // (userspace/guard/fs_gate.h); fs_gate.enforce is set from --enforce.
  bool enforce_fs = false;
  FsGateOptions fs_gate;
  PgGateOptions pg;  // --pg-listen, --pg-upstream: the Postgres gate (judged by capture.policy's SQL rules)
  // --integrity PATH (repeatable), --integrity-interval D: the files' baselines,
  // re-checked (ctl/guard_integrity.h).
  GuardIntegrityOptions integrity;
  // --circuit-breaker, --breaker-threshold N, --breaker-window D: the risk of
  // the findings over the window; crossing it revokes the egress (enforcing)
  // and ends the command's process group, faultctl exiting 9.
  struct Breaker {
    bool on = false;
    uint32_t threshold = 100;
    std::chrono::milliseconds window{60'000};
  } breaker;
};

// args are what follows "guard": flags, then "--" and the command to guard.
[[nodiscard]] Result<Parsed<GuardArgs>> parse_guard_args(const std::vector<std::string>& args);

}  // namespace faultline
