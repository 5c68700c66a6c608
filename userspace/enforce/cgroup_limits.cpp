// Limits written to cgroup files, v2 where the controller is there, v1 else.
#include "userspace/enforce/cgroup_limits.h"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/cgroup.h"
#include "base/files.h"

namespace faultline {
namespace {

// A counter of a flat keyed file ("max 37", "oom_kill 1"); 0 when absent.
uint64_t keyed(const std::string& file, const std::string& key) {
  auto t = read_text_file(file);
  if (!t) return 0;
  std::istringstream in(*t);
  for (std::string k; in >> k;) {
    uint64_t v = 0;
    in >> v;
    if (k == key) return v;
  }
  return 0;
}

}  // namespace

Result<CgroupLimits> CgroupLimits::apply(const ResourceLimits& limits, const std::string& v2_dir,
                                         const std::string& name) {
  CgroupLimits out;
  const auto& mounts = cgroup_mounts();
  struct Want {
    const char* controller;
    bool asked;
    std::string value;
  };
  const Want wants[] = {
      {"memory", limits.memory_bytes != 0, std::to_string(limits.memory_bytes)},
      {"pids", limits.pids != 0, std::to_string(limits.pids)},
      {"cpu", limits.cpu_percent != 0, std::to_string(limits.cpu_percent) + "%"},
  };
  for (const Want& w : wants) {
    if (!w.asked) continue;
    const std::string c = w.controller;
    std::string dir;
    bool v2 = false;
    if (v2_has_controller(c)) {
      // A child's limit files exist once its parent enables the controller for it.
      const std::string parent = v2_dir.substr(0, v2_dir.rfind('/'));
      if (auto st = write_text_file(parent + "/cgroup.subtree_control", "+" + c); !st)
        return make_error(st.error().err, "--max-" + c + ": cannot enable the " + c + " controller in " + parent +
                                              ": " + st.error().describe());
      dir = v2_dir;
      v2 = true;
    } else if (mounts.v1.contains(c)) {
      // Under our own v1 cgroup: the command stays inside whatever limit we run under.
      auto rel = cgroup_of(::getpid(), c);
      if (!rel) return rel.error();
      dir = mounts.v1.at(c) + (*rel == "/" ? "" : *rel) + "/" + name;
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return errno_error("cannot create cgroup " + dir);
      out.v1_dirs_.push_back(dir);
    } else {
      return make_error(ENOTSUP, "this host has no " + c + " cgroup controller (v2 or v1): no limit can be set");
    }
    auto put = [&](const std::string& file, const std::string& value, const std::string& said) -> Status {
      FL_TRY(write_text_file(dir + "/" + file, value));
      out.files_.push_back({c, dir, file, said, v2});
      return {};
    };
    if (c == "memory") {
      FL_TRY(put(v2 ? "memory.max" : "memory.limit_in_bytes", w.value, w.value + " bytes"));
      // No escape into swap, where the host accounts it.
      (void)write_text_file(dir + (v2 ? "/memory.swap.max" : "/memory.memsw.limit_in_bytes"), v2 ? "0" : w.value);
      if (v2) (void)write_text_file(dir + "/memory.oom.group", "1");
    } else if (c == "pids") {
      FL_TRY(put("pids.max", w.value, w.value));
    } else {
      const std::string quota = std::to_string(uint64_t{limits.cpu_percent} * 1000);
      if (v2) {
        FL_TRY(put("cpu.max", quota + " 100000", w.value));
      } else {
        FL_TRY(write_text_file(dir + "/cpu.cfs_period_us", "100000"));
        FL_TRY(put("cpu.cfs_quota_us", quota, w.value));
      }
    }
  }
  return out;
}

CgroupLimits::~CgroupLimits() {
  for (auto it = v1_dirs_.rbegin(); it != v1_dirs_.rend(); ++it) (void)remove_cgroup(*it);
}

Status CgroupLimits::join(pid_t pid) const {
  for (const std::string& dir : v1_dirs_) FL_TRY(write_text_file(dir + "/cgroup.procs", std::to_string(pid)));
  return {};
}

std::string CgroupLimits::describe() const {
  std::string out;
  for (const File& f : files_) {
    if (!out.empty()) out += ", ";
    out += f.controller + " " + f.value + " (" + f.dir + "/" + f.file + (f.v2 ? "" : ", cgroup v1") + ")";
  }
  return out;
}

std::string CgroupLimits::hits() const {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  for (const File& f : files_) {
    if (f.controller == "pids") {
      if (uint64_t n = keyed(f.dir + "/pids.events", "max")) add("pids: " + std::to_string(n) + " forks refused");
    } else if (f.controller == "memory") {
      const uint64_t n = keyed(f.dir + (f.v2 ? "/memory.events" : "/memory.oom_control"), "oom_kill");
      if (n != 0) add("memory: " + std::to_string(n) + " OOM kills");
    } else if (f.controller == "cpu") {
      if (uint64_t n = keyed(f.dir + "/cpu.stat", "nr_throttled"))
        add("cpu: throttled in " + std::to_string(n) + " periods of 100ms");
    }
  }
  return out;
}

}  // namespace faultline
