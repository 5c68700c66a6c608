// The cgroup rung: the sockaddr programs' connect/sendmsg/bind/sock_create
// hooks with bpf_set_retval, on a cgroup, a process's cgroup (with a pid
// filter), or a fresh cgroup for a command.
#include <bpf/bpf.h>

#include <optional>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/seeded_random.h"
#include "base/units.h"
#include "faultline/sockaddr_abi.h"
#include "loader/sockaddr_object.h"
#include "userspace/faults/syscall/rung.h"

namespace faultline {
namespace {

uint32_t op_bits(const std::vector<std::string>& syscalls) {
  uint32_t bits = 0;
  for (const auto& s : syscalls) {
    if (s == "connect") bits |= FL_OP_BIT(FL_OP_CONNECT);
    if (s == "sendmsg" || s == "sendto") bits |= FL_OP_BIT(FL_OP_SENDMSG);
    if (s == "socket") bits |= FL_OP_BIT(FL_OP_SOCKET);
    if (s == "bind") bits |= FL_OP_BIT(FL_OP_BIND);
  }
  return bits;
}

class CgroupRung final : public SyscallRung {
 public:
  Result<RungStart> start(const SyscallFaultSpec& spec) override {
    RungStart s;
    s.how = "cgroup socket hooks";
    UniqueFd cgroup_fd;
    if (!spec.command.empty()) {
      auto cg = ScopedCgroup::create("faultline-syscall-" + std::to_string(::getpid()));
      if (!cg) return cg.error();
      fresh_.emplace(std::move(*cg));
      cgroup_fd.reset(::dup(fresh_->fd()));
      s.scope = "command " + spec.command[0];
    } else {
      std::string path = spec.cgroup;
      if (spec.pid != 0) {
        auto p = cgroup_of(spec.pid);
        if (!p) return input_error(p.error().err, "--pid " + std::to_string(spec.pid) + ": " + p.error().message);
        path = *p;
      }
      auto cg = open_cgroup_v2(path, spec.pid ? "the cgroup of --pid" : "--cgroup");
      if (!cg) return as_bad_input(cg.error());
      cgroup_fd = std::move(cg->fd);
      s.scope = spec.pid ? "pid " + std::to_string(spec.pid) : "cgroup " + spec.cgroup;
    }
    auto obj = SockaddrObject::load();
    if (!obj) return obj.error();
    obj_.emplace(std::move(*obj));
    fl_sa_policy pol{};
    pol.armed = 1;
    s.expires_ns = boottime_ns() + spec.duration_ns;
    pol.expires_ns = s.expires_ns;  // the in-kernel deadman
    pol.target_tgid = static_cast<uint32_t>(spec.pid);
    pol.inject_ops = op_bits(spec.syscalls);
    pol.inject_prob = percent_to_prob(spec.percent);
    pol.inject_errno = static_cast<uint32_t>(spec.err);
    pol.inject_budget = call_budget(spec, s.expires_ns - spec.duration_ns);
    uint32_t zero = 0;
    if (spec.seed) {
      // One stream (0) for the whole fault, in call order: see fl_sa_rng.
      fl_rng rng{seeded_state(*spec.seed, 0), *spec.seed};
      if (bpf_map_update_elem(obj_->rng_fd(), &zero, &rng, BPF_ANY) != 0)
        return errno_error("cannot seed the socket hooks' generator");
      pol.flags |= FL_SA_SEEDED;
    }
    if (bpf_map_update_elem(obj_->policy_fd(), &zero, &pol, BPF_ANY) != 0)
      return errno_error("cannot arm the socket hooks' policy");
    FL_TRY(obj_->attach(cgroup_fd.get()));
    if (fresh_) {
      auto child = HeldChild::spawn(spec.command, nullptr, "faultctl run syscall");
      if (!child) return child.error();
      FL_TRY(fresh_->join(child->pid()));
      s.child.emplace(std::move(*child));
    }
    s.policy_fd = obj_->policy_fd();
    s.stats_fd = obj_->stats_fd();
    return s;
  }

  Status release(HeldChild& child) override { return child.release(); }

  void disarm() override {
    if (obj_) obj_->detach();
  }

  RungCounts counts() const override {
    if (!obj_) return {};
    fl_sa_stats st = sum_sa_stats(obj_->stats_fd()).value_or(fl_sa_stats{});
    RungCounts c{st.injected, 0};
    uint32_t zero = 0;
    fl_sa_policy pol{};
    if (bpf_map_lookup_elem(obj_->policy_fd(), &zero, &pol) == 0) add_budget_counts(c, pol.inject_budget);
    return c;
  }

 private:
  // Declared before the object: a fresh cgroup outlives the hooks on it.
  std::optional<ScopedCgroup> fresh_;
  std::optional<SockaddrObject> obj_;
};

}  // namespace

std::unique_ptr<SyscallRung> make_cgroup_rung() { return std::make_unique<CgroupRung>(); }

}  // namespace faultline
