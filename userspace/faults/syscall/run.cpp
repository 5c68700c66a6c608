// SyscallRun: the syscall family's side of the guarded run.
#include "userspace/faults/syscall/run.h"

#include <signal.h>

#include <ostream>
#include <sstream>

#include "base/clock.h"
#include "base/errno_names.h"
#include "loader/netns.h"

namespace faultline {

Result<std::unique_ptr<SyscallRun>> SyscallRun::plan(const SyscallFaultSpec& spec, std::ostream& warn) {
  auto p = plan_syscall_fault(spec);
  if (!p) return p.error();
  SyscallFaultSpec s = spec;
  // A drawn seed is kept only where the draw follows it: a kernel rung's run
  // keeps none rather than one that would replay nothing.
  if (s.seed && s.seed_drawn && !seeds_honoured(p->mechanism)) {
    s.seed.reset();
    if (s.percent < 100)
      p->why += "; unseeded: this rung draws with bpf_get_prandom_u32, so --percent cannot be replayed";
  }
  return std::unique_ptr<SyscallRun>(new SyscallRun(s, *p, warn));
}

nlohmann::json SyscallRun::plan() const {
  nlohmann::json j{{"kind", "syscall"},
                   {"syscalls", spec_.syscalls},
                   {"errno", errno_name(spec_.err)},
                   {"percent", spec_.percent},
                   {"duration_ms", spec_.duration_ns / 1'000'000},
                   {"mechanism", mechanism_name(plan_.mechanism)},
                   {"why", plan_.why}};
  if (!spec_.command.empty()) j["command"] = spec_.command;
  if (spec_.pid != 0) j["pid"] = spec_.pid;
  if (!spec_.cgroup.empty()) j["cgroup"] = spec_.cgroup;
  if (!spec_.paths.empty()) j["paths"] = spec_.paths;
  j.update(spec_.brakes_json());
  j.update(seed_json());
  return j;
}

nlohmann::json SyscallRun::seed_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (!spec_.seed) return j;
  j["seed"] = std::to_string(*spec_.seed);  // a string, as for packet faults
  j["seed_source"] = spec_.seed_drawn ? "drawn" : "given";
  return j;
}

std::string SyscallRun::dry_run_text() const {
  return "dry run: would fail " + spec_.describe() + "\n  mechanism: " + plan_.why + "\n";
}

uint32_t SyscallRun::netns_inode() const {
  auto ns = resolve_netns("");
  return ns ? ns->inode : 0;
}

Result<FaultStart> SyscallRun::apply() {
  switch (plan_.mechanism) {
    case SyscallMechanism::CgroupSockAddr:
      rung_ = make_cgroup_rung();
      break;
    case SyscallMechanism::BpfLsm:
      rung_ = make_lsm_rung();
      break;
    case SyscallMechanism::SeccompNotify:
      rung_ = make_seccomp_rung();
      break;
  }
  auto started = rung_->start(spec_);
  if (!started) return started.error();
  if (started->child) child_.emplace(std::move(*started->child));

  Session s;
  s.kind = "syscall";
  s.mechanism = mechanism_name(plan_.mechanism);
  s.summary = spec_.describe() + ", " + started->scope + " (" + s.mechanism + ")";
  s.policy_map_id = started->policy_fd >= 0 ? map_id_of(started->policy_fd) : 0;
  s.stats_map_id = started->stats_fd >= 0 ? map_id_of(started->stats_fd) : 0;
  s.expires_ns = started->expires_ns;
  if (auto reg = register_session(std::move(s), warn_)) session_.emplace(std::move(*reg));
  // Registered first, released second: once the command runs, status lists its fault.
  if (child_) {
    if (auto go = rung_->release(*child_); !go) {
      rung_->disarm();
      if (session_) session_->end();
      return go.error();
    }
  }

  FaultStart f;
  f.id = session_ ? session_->id() : "syscall";
  f.expires_ns = started->expires_ns;
  f.until_command_exits = child_.has_value();
  f.event = started->event;
  f.event["mechanism"] = mechanism_name(plan_.mechanism);
  f.event["scope"] = started->scope;
  f.event.update(seed_json());
  f.text = "syscall fault " + f.id + ": " + spec_.describe() + ", " + started->scope + " (" + started->how + ")";
  return f;
}

std::optional<FaultEnding> SyscallRun::check() {
  if (child_) {
    if (auto code = child_->poll_exit())
      return FaultEnding{RunOutcome::Completed, "command exited " + std::to_string(*code), *code};
  }
  if (session_ && !ended_) {
    // Owner-kept counters (seccomp has no map for status to read).
    if (plan_.mechanism == SyscallMechanism::SeccompNotify) {
      RungCounts c = rung_->counts();
      nlohmann::json counters{{"failed", c.injected}, {"passed", c.passed}};
      if (spec_.max_injections) {
        counters["cap"] = spec_.max_injections;
        counters["cap_spared"] = c.cap_refused;
      }
      session_->set_counters(counters);
    }
    if (session_->abort_requested())
      return FaultEnding{RunOutcome::AbortedFromOutside, "ended from outside (faultctl abort)", std::nullopt};
  }
  return std::nullopt;
}

FaultObservation SyscallRun::observe() {
  RungCounts c = rung_->counts();
  FaultObservation o;
  o.fields = {{"injected", c.injected}, {"passed", c.passed}};
  o.text = std::to_string(c.injected) + " calls failed with " + errno_name(spec_.err) + ", " +
           std::to_string(c.passed) + " passed";
  if (spec_.max_injections) {
    const bool reached = c.reached_ns != 0 || c.injected >= spec_.max_injections;
    nlohmann::json cap{{"max", spec_.max_injections}, {"injected", c.injected}, {"reached", reached}};
    std::string t = "cap " + std::to_string(spec_.max_injections) + ": " + std::to_string(c.injected) + " injected";
    if (reached) {
      cap["spared"] = c.cap_refused;
      t = "cap reached: " + std::to_string(spec_.max_injections) +
          (spec_.max_injections == 1 ? " injection" : " injections");
      const uint64_t now = boottime_ns();
      if (c.reached_ns != 0 && c.reached_ns <= now) {
        cap["reached_at"] = iso8601(wall_seconds() - static_cast<double>(now - c.reached_ns) / 1e9);
        t += " at " + cap["reached_at"].get<std::string>();
      }
      t += " (" + std::to_string(c.cap_refused) + " spared)";
    }
    o.fields["cap"] = cap;
    o.text += " | " + t;
  }
  return o;
}

Status SyscallRun::end(std::string_view) {
  if (ended_) return {};
  ended_ = true;
  rung_->disarm();
  if (session_) session_->end();
  return {};
}

bool SyscallRun::forward_signal(int sig) {
  if (!child_ || child_->poll_exit()) return false;
  ::kill(child_->pid(), sig);
  return true;
}

}  // namespace faultline
