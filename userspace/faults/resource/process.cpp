// ProcessFault: find the targets, refuse the dangerous ones, freeze or signal them.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <regex>
#include <set>

#include "base/cgroup.h"
#include "base/clock.h"
#include "userspace/faults/resource/fault.h"

namespace faultline {
namespace {

// Faultline's own helpers: stopping a reaper would disarm a deadman.
bool is_faultline_helper(const ProcessInfo& p) {
  return p.comm.rfind("fl-reaper-", 0) == 0 || p.comm.rfind("fl-cpu-", 0) == 0 || p.comm.rfind("fl-mem-", 0) == 0;
}

// The processes we never touch without --force, and why.
struct ProtectedProcesses {
  int self = ::getpid();
  std::set<int> ancestors;
  ProtectedProcesses() {
    for (int a : ancestors_of(self)) ancestors.insert(a);
  }
  // "" when the process may be hit.
  [[nodiscard]] std::string refusal(const ProcessInfo& p, bool force) const {
    std::string who = "pid " + std::to_string(p.pid) + " (" + p.comm + ")";
    if (p.pid == self) return who + ": that is faultctl itself";
    if (is_faultline_helper(p)) return who + ": that is one of Faultline's own helpers";
    if (force) return "";
    if (p.pid == 1) return who + ": that is PID 1; add --force if you mean it";
    if (p.kernel_thread()) return who + ": that is a kernel thread; add --force if you mean it";
    if (ancestors.contains(p.pid))
      return who + ": that is an ancestor of faultctl (your shell or session); add --force if you mean it";
    return "";
  }
};

// "Its own cgroup": a non-root v2 cgroup that holds this process alone and has no
// children, so freezing the cgroup freezes exactly this process.
std::string own_cgroup_dir(int pid) {
  const auto& m = cgroup_mounts();
  if (m.v2.empty()) return "";
  auto rel = cgroup_of(pid);
  if (!rel || *rel == "/" || rel->empty()) return "";
  std::string dir = m.v2 + *rel;
  struct stat st {};
  if (::stat((dir + "/cgroup.freeze").c_str(), &st) != 0) return "";
  auto procs = cgroup_procs(dir, false);
  if (procs.size() != 1 || procs[0] != pid || cgroup_has_children(dir)) return "";
  return dir;
}

bool cgroup_frozen(const std::string& dir) {
  auto ev = read_text_file(dir + "/cgroup.events");
  return ev && ev->find("frozen 1") != std::string::npos;
}

}  // namespace

Result<std::unique_ptr<ProcessFault>> ProcessFault::plan(const ResourceSpec& spec) {
  std::unique_ptr<ProcessFault> f(new ProcessFault(spec));
  const ProtectedProcesses protected_procs;
  const bool freeze = spec.action == ProcessAction::Freeze;
  auto add = [&](const ProcessInfo& p, const std::string& flag) -> Status {
    if (auto why = protected_procs.refusal(p, spec.force); !why.empty())
      return make_error(EPERM, flag + ": refusing " + why);
    Target t{p, freeze ? "sigstop" : "signal", ""};
    if (freeze) {
      if (p.stopped())
        return make_error(EINVAL, flag + ": pid " + std::to_string(p.pid) + " (" + p.comm + ") is already stopped");
      if (auto dir = own_cgroup_dir(p.pid); !dir.empty()) {
        t.method = "cgroup-freeze";
        t.cgroup = dir;
      }
    }
    f->targets_.push_back(std::move(t));
    return {};
  };

  if (spec.pid) {
    std::string flag = "--pid " + std::to_string(*spec.pid);
    auto p = read_process(*spec.pid);
    if (!p) return make_error(ESRCH, flag + ": no such process");
    FL_TRY(add(*p, flag));
  } else if (!spec.name.empty()) {
    std::string flag = "--name '" + spec.name + "'";
    std::regex re;
    try {
      re = std::regex(spec.name, std::regex::extended);
    } catch (const std::regex_error& e) {
      return make_error(EINVAL, flag + ": not a valid extended regular expression (" + e.what() + ")");
    }
    for (int pid : list_pids()) {
      auto p = read_process(pid);
      if (!p || p->state == 'Z' || pid == protected_procs.self || is_faultline_helper(*p)) continue;
      std::string a0 = p->kernel_thread() ? "" : argv0_basename(pid);
      if (!std::regex_match(p->comm, re) && (a0.empty() || !std::regex_match(a0, re))) continue;
      FL_TRY(add(*p, flag));
    }
    if (f->targets_.empty())
      return make_error(ESRCH, flag + ": matches no process (the whole name must match, as pgrep -x)");
    if (f->targets_.size() > ResourceCaps::kMaxProcessTargets && !spec.force)
      return make_error(E2BIG, flag + ": matches " + std::to_string(f->targets_.size()) + " processes, more than " +
                                   std::to_string(ResourceCaps::kMaxProcessTargets) + "; narrow it or add --force");
  } else {
    std::string flag = "--cgroup " + spec.cgroup;
    auto dir = resolve_cgroup_v2_dir(spec.cgroup, "--cgroup");
    if (!dir) return dir.error();
    f->cgroup_dir_ = *dir;
    auto pids = cgroup_procs(*dir, true);
    if (pids.empty()) return make_error(ESRCH, flag + ": holds no process");
    for (int pid : pids) {
      auto p = read_process(pid);
      if (!p) continue;
      // Freezing the cgroup faultctl runs in would freeze faultctl and its reaper: never, even with --force.
      if (pid == protected_procs.self) return make_error(EPERM, flag + ": refusing, it holds faultctl itself");
      if (auto why = protected_procs.refusal(*p, spec.force); !why.empty())
        return make_error(EPERM, flag + ": refusing, it holds " + why);
      f->targets_.push_back({*p, freeze ? "cgroup-freeze" : "signal", freeze ? *dir : ""});
    }
    if (freeze) {
      struct stat st {};
      if (::stat((*dir + "/cgroup.freeze").c_str(), &st) != 0)
        return make_error(EINVAL, flag + ": the root cgroup cannot be frozen; name a child cgroup");
      auto cur = read_text_file(*dir + "/cgroup.freeze");
      if (cur && cur->rfind("1", 0) == 0) return make_error(EINVAL, flag + ": is already frozen");
    }
  }
  return f;
}

nlohmann::json ProcessFault::plan() const {
  nlohmann::json j;
  j["action"] = spec_.action == ProcessAction::Freeze ? "freeze" : "kill";
  if (spec_.action == ProcessAction::Kill) j["signal"] = signal_name(spec_.signal);
  if (!cgroup_dir_.empty()) j["cgroup"] = cgroup_dir_;
  j["targets"] = nlohmann::json::array();
  for (const auto& t : targets_) {
    nlohmann::json tj{{"pid", t.info.pid}, {"comm", t.info.comm}, {"method", t.method}};
    if (!t.cgroup.empty()) tj["cgroup"] = t.cgroup;
    j["targets"].push_back(tj);
  }
  return j;
}

Status ProcessFault::apply(UndoJournal& journal) {
  if (spec_.action == ProcessAction::Kill) {
    for (const auto& t : targets_) {
      if (!is_alive(t.info.identity())) continue;  // ended by itself since the plan
      if (::kill(t.info.pid, spec_.signal) != 0 && errno != ESRCH)
        return errno_error("cannot send " + signal_name(spec_.signal) + " to pid " + std::to_string(t.info.pid));
    }
    return {};
  }
  std::set<std::string> frozen;
  for (const auto& t : targets_) {
    if (t.method == "cgroup-freeze") {
      if (frozen.contains(t.cgroup)) continue;
      FL_TRY(journal.record(undo::thaw(t.cgroup)));
      FL_TRY(write_text_file(t.cgroup + "/cgroup.freeze", "1"));
      frozen.insert(t.cgroup);
      continue;
    }
    if (!is_alive(t.info.identity()))
      return make_error(ESRCH, "pid " + std::to_string(t.info.pid) + " ended before it could be frozen");
    FL_TRY(journal.record(undo::resume(t.info.identity())));
    if (::kill(t.info.pid, SIGSTOP) != 0) return errno_error("cannot stop pid " + std::to_string(t.info.pid));
  }
  // Freezing is asynchronous (a task in the kernel stops at its next return to user space).
  for (int i = 0; i < 200; ++i) {
    bool all = true;
    for (const auto& dir : frozen) all = all && cgroup_frozen(dir);
    for (const auto& t : targets_) {
      if (t.method != "sigstop") continue;
      auto p = read_process(t.info.pid);
      all = all && (!p || p->stopped() || p->state == 'Z');
    }
    if (all) return {};
    sleep_ms(10);
  }
  return make_error(ETIMEDOUT, "the targets did not stop within 2s");
}

nlohmann::json ProcessFault::observe() {
  size_t alive = 0, held = 0;
  for (const auto& t : targets_) {
    auto p = read_process(t.info.pid);
    if (!p || p->start != t.info.start || p->state == 'Z') continue;
    ++alive;
    if (t.method == "sigstop" && p->stopped()) ++held;
    if (t.method == "cgroup-freeze" && cgroup_frozen(t.cgroup)) ++held;
  }
  nlohmann::json j{{"targets", targets_.size()}, {"alive", alive}};
  if (spec_.action == ProcessAction::Freeze) {
    j["frozen"] = held;
    j["text"] = std::to_string(held) + " of " + std::to_string(targets_.size()) + " frozen";
  } else {
    j["text"] = std::to_string(targets_.size() - alive) + " of " + std::to_string(targets_.size()) + " gone after " +
                signal_name(spec_.signal);
  }
  return j;
}

Result<std::unique_ptr<ResourceFault>> plan_resource_fault(const ResourceSpec& spec) {
  FL_TRY(validate(spec));
  switch (spec.kind) {
    case ResourceKind::Process: {
      auto f = ProcessFault::plan(spec);
      if (!f) return f.error();
      return std::unique_ptr<ResourceFault>(std::move(*f));
    }
    case ResourceKind::Cpu: {
      auto f = CpuBurn::plan(spec);
      if (!f) return f.error();
      return std::unique_ptr<ResourceFault>(std::move(*f));
    }
    case ResourceKind::Memory: {
      auto f = MemoryHog::plan(spec);
      if (!f) return f.error();
      return std::unique_ptr<ResourceFault>(std::move(*f));
    }
    case ResourceKind::Disk: {
      auto f = DiskFill::plan(spec);
      if (!f) return f.error();
      return std::unique_ptr<ResourceFault>(std::move(*f));
    }
  }
  return make_error(EINVAL, "unknown resource fault kind");
}

}  // namespace faultline
