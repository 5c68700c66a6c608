// The LSM rung: BPF LSM hooks (file_open, file_permission, bprm_check_security,
// socket_connect, inode_unlink) filtered in the kernel by cgroup or pid.
#include <bpf/bpf.h>
#include <signal.h>

#include <optional>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/units.h"
#include "faultline/syscall_abi.h"
#include "loader/syscall_lsm_object.h"
#include "userspace/faults/syscall/rung.h"

namespace faultline {
namespace {

class LsmRung final : public SyscallRung {
 public:
  Result<RungStart> start(const SyscallFaultSpec& spec) override {
    const LsmCoverage cov = lsm_coverage(spec.syscalls);
    const bool wrapped = !spec.command.empty();
    RungStart s;
    s.how = "BPF LSM: " + cov.hooks;
    s.event["hooks"] = cov.hooks;
    fl_sc_policy pol{};
    if (wrapped) {
      auto cg = ScopedCgroup::create("faultline-syscall-" + std::to_string(::getpid()));
      if (!cg) return cg.error();
      fresh_.emplace(std::move(*cg));
      pol.cgroup_id = fresh_->id();  // a cgroup's id is its directory's inode number
      pol.cgroup_level = cgroup_level(fresh_->path());
      s.scope = "command " + spec.command[0];
    } else if (spec.pid != 0) {
      if (::kill(spec.pid, 0) != 0 && errno == ESRCH)
        return input_error(ESRCH, "--pid " + std::to_string(spec.pid) + ": no such process");
      pol.target_tgid = static_cast<uint32_t>(spec.pid);
      s.scope = "pid " + std::to_string(spec.pid);
    } else {
      auto cg = open_cgroup_v2(spec.cgroup, "--cgroup");
      if (!cg) return as_bad_input(cg.error());
      pol.cgroup_id = cg->id;
      pol.cgroup_level = cgroup_level(cg->path);
      s.scope = "cgroup " + spec.cgroup;
    }
    auto obj = SyscallLsmObject::load();
    if (!obj) return obj.error();
    obj_.emplace(std::move(*obj));
    pol.armed = 1;
    s.expires_ns = boottime_ns() + spec.duration_ns;
    pol.expires_ns = s.expires_ns;  // the in-kernel deadman
    pol.prob = percent_to_prob(spec.percent);
    pol.err = static_cast<uint32_t>(spec.err);
    pol.budget = call_budget(spec, s.expires_ns - spec.duration_ns);
    pol.flags = spec.include_loader ? 0 : FL_SC_SKIP_LOADER;
    // A wrapped command's own execve is how it starts, not a call it makes:
    // exec faults are armed once it has exec'd (below).
    pol.ops = wrapped ? cov.ops & ~FL_SC_BIT(FL_SC_EXEC) : cov.ops;
    FL_TRY(obj_->set_policy(pol));
    FL_TRY(obj_->attach(cov.ops));
    if (wrapped) {
      auto child = HeldChild::spawn(spec.command, nullptr, "faultctl run syscall");
      if (!child) return child.error();
      FL_TRY(fresh_->join(child->pid()));
      s.child.emplace(std::move(*child));
      if (pol.ops != cov.ops) {
        exec_ops_ = cov.ops;
        armed_ = pol;
      }
    }
    s.policy_fd = obj_->policy_fd();
    s.stats_fd = obj_->stats_fd();
    return s;
  }

  Status release(HeldChild& child) override {
    FL_TRY(child.release());  // returns once the command has exec'd
    if (!obj_ || !exec_ops_) return {};
    // Exec faults, armed now: from the live policy, so that the counters of
    // --after and the cap stay as counted.
    fl_sc_policy pol = *armed_;
    uint32_t zero = 0;
    (void)bpf_map_lookup_elem(obj_->policy_fd(), &zero, &pol);
    pol.ops = *exec_ops_;
    return obj_->set_policy(pol);
  }

  void disarm() override {
    if (obj_) obj_->detach();
  }

  RungCounts counts() const override {
    RungCounts c;
    if (!obj_) return c;
    if (auto st = obj_->stats()) {
      uint64_t seen = 0;
      for (int i = 0; i < FL_SC_OP_MAX; ++i) {
        c.injected += st->injected[i];
        seen += st->seen[i];
      }
      c.passed = seen - c.injected;
    }
    uint32_t zero = 0;
    fl_sc_policy pol{};
    if (bpf_map_lookup_elem(obj_->policy_fd(), &zero, &pol) == 0) add_budget_counts(c, pol.budget);
    return c;
  }

 private:
  std::optional<ScopedCgroup> fresh_;
  std::optional<SyscallLsmObject> obj_;
  // A wrapped command's exec faults, armed by release() once it has exec'd.
  std::optional<uint32_t> exec_ops_;
  std::optional<fl_sc_policy> armed_;  // the policy as start() set it
};

}  // namespace

std::unique_ptr<SyscallRung> make_lsm_rung() { return std::make_unique<LsmRung>(); }

}  // namespace faultline
