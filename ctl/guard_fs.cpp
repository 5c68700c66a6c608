// The file watch of faultctl guard: who counts (the command's process tree
// as root, anyone as a user), how a change is said, and the summary.
#include "ctl/guard_fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <mutex>

#include "base/cgroup.h"
#include "userspace/guard/guard_judge.h"

namespace faultline {
namespace {

// "0 B", "812 B", "1.2 KB", "3.4 MB" (powers of 1000).
std::string short_size(uint64_t b) {
  if (b < 1000) return std::to_string(b) + " B";
  const char* units[] = {"KB", "MB", "GB", "TB"};
  double v = static_cast<double>(b) / 1000;
  int u = 0;
  while (v >= 1000 && u < 3) {
    v /= 1000;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return out;
}

}  // namespace

Result<std::unique_ptr<GuardFsWatch>> GuardFsWatch::start(const GuardFsWatchOptions& o, GuardJudge* judge,
                                                          std::ostream& log) {
  std::unique_ptr<GuardFsWatch> g(new GuardFsWatch());
  FsWatchOptions w;
  w.root = o.path.empty() ? "." : o.path;
  if (!o.activity_log.empty()) {
    char real[PATH_MAX];
    // The log may not exist yet: its folder's real path and its name.
    const std::string& f = o.activity_log;
    const size_t slash = f.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : f.substr(0, slash);
    if (::realpath(dir.c_str(), real) != nullptr)
      w.ignore.push_back(std::string(real) + (std::string(real) == "/" ? "" : "/") + f.substr(slash + 1));
  }
  std::string who = "anyone's changes count: inotify cannot tell who made them";
  if (::geteuid() == 0) {
    auto tree = CommandTree::listen();
    if (tree) {
      g->tree_ = std::move(*tree);
      w.use_fanotify = true;
      w.in_command = [t = g->tree_.get()](pid_t pid) { return t->contains(pid); };
      who = "only the command's processes count";
    } else {
      log << "faultline guard: fs: the process connector is not available (" << tree.error().describe()
          << "): inotify, which cannot tell who made a change\n";
    }
  }
  std::shared_ptr<ActivityWriter> activity = judge != nullptr ? judge->activity() : nullptr;
  const std::string identity = judge != nullptr ? judge->identity() : std::string();
  w.on_change = [activity, identity](const FsChange& c) {
    std::string line = std::string("faultline guard: fs: ") + fs_change_name(c.kind) + " " + c.path;
    if (c.kind != FsChangeKind::Delete) line += " (" + short_size(c.size) + ")";
    if (c.pid != 0) line += ", pid " + std::to_string(c.pid);
    line += "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size())).flush();
    if (!activity) return;
    ActivityEntry e;
    e.identity = identity;
    e.kind = "fs";
    e.method = fs_change_name(c.kind);
    for (char& ch : e.method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    e.path = c.path;
    e.verdict = "allow";
    activity->post(std::move(e));
  };
  auto watch = FsWatch::start(w);
  if (!watch && w.use_fanotify) {
    // A file system fanotify cannot report names on (no file handles): inotify.
    log << "faultline guard: fs: fanotify cannot watch " << w.root << " (" << watch.error().describe()
        << "): inotify, which cannot tell who made a change\n";
    w.use_fanotify = false;
    w.in_command = nullptr;
    who = "anyone's changes count: inotify cannot tell who made them";
    watch = FsWatch::start(w);
  }
  if (!watch) return make_error(watch.error().err, "--watch-fs " + watch.error().describe());
  const bool fan = (*watch)->fanotify();
  g->watch_ = std::move(*watch);
  log << "faultline guard: fs: watching " << g->watch_->root() << " with " << (fan ? "fanotify" : "inotify") << " ("
      << who << ")\n";
  return g;
}

void GuardFsWatch::forked(pid_t pid) {
  if (tree_) tree_->set_root(pid);
}

void GuardFsWatch::finish(std::ostream& log) {
  watch_->stop();
  const FsTotals t = watch_->totals();
  log << "faultline guard: fs: agent touched " << t.touched() << " file(s) - " << t.created << " created, "
      << t.modified << " modified, " << t.deleted << " deleted";
  if (t.lost != 0) log << " (the kernel dropped " << t.lost << " event batches: the counts are short)";
  log << "\n";
}

Result<std::unique_ptr<FsGate>> start_fs_gate(FsGateOptions o, bool enforce, GuardJudge* judge, std::ostream& log) {
  o.enforce = enforce;
  std::shared_ptr<ActivityWriter> activity = judge != nullptr ? judge->activity() : nullptr;
  const std::string identity = judge != nullptr ? judge->identity() : std::string();
  o.on_denied = [activity, identity](const FsDecision& d) {
    const std::string line =
        std::string("faultline guard: fs: ") + (d.blocked ? "blocked " : "would block (monitor: it ran) ") +
        (d.exec ? "exec '" : "open '") + d.path + "' (" + d.rule + "), pid " + std::to_string(d.pid) + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size())).flush();
    if (!activity) return;
    ActivityEntry e;
    e.identity = identity;
    e.kind = "fs";
    e.method = d.exec ? "EXEC" : "OPEN";
    e.path = d.path;
    e.verdict = "deny";
    e.rule = d.rule;
    activity->post(std::move(e));
  };
  auto gate = FsGate::create(std::move(o));
  if (!gate) return make_error(gate.error().err, "--enforce-fs: " + gate.error().describe());
  // The cgroup the guard makes for the command (userspace/enforce/guard.cpp),
  // named from its root, which the reaper keeps open: it outlives us.
  const std::string& v2 = cgroup_mounts().v2;
  if (v2.empty()) return make_error(ENOTSUP, "--enforce-fs: no cgroup v2 hierarchy: " + cgroup_mounts().v2_found);
  UniqueFd root(::open(v2.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return errno_error("--enforce-fs: " + v2);
  const std::string kill = "faultline-guard-" + std::to_string(::getpid()) + "/cgroup.kill";
  if (auto st = (*gate)->start_reaper(root.get(), kill); !st)
    return make_error(st.error().err, "--enforce-fs: " + st.error().describe());
  log << "faultline guard: fs: every open and exec of the command is judged (fanotify permission events on its "
         "own mounts; "
      << (enforce ? "enforce: refused with EPERM" : "monitor: reported, not refused") << ")\n";
  return std::move(*gate);
}

void print_fs_gate_summary(const FsGate& gate, std::ostream& log) {
  log << "faultline guard: fs: " << gate.judged() << " opens judged on " << gate.mounts() << " mounts, "
      << gate.denied() << (gate.enforce() ? " refused" : " would be refused") << " (--enforce-fs)\n";
}

}  // namespace faultline
