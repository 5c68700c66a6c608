// MemoryHog: a child in a cgroup of its own, limited to the size asked, touching every page.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "base/cgroup.h"
#include "userspace/faults/resource/fault.h"

namespace faultline {
namespace {

struct MemInfo {
  uint64_t total = 0;
  uint64_t available = 0;
};

MemInfo meminfo() {
  MemInfo m;
  auto t = read_text_file("/proc/meminfo");
  if (!t) return m;
  std::istringstream in(*t);
  for (std::string key; in >> key;) {
    uint64_t kb = 0;
    std::string unit;
    in >> kb >> unit;
    if (key == "MemTotal:") m.total = kb * 1024;
    if (key == "MemAvailable:") m.available = kb * 1024;
  }
  return m;
}

// Lazy allocation would make a large mmap cost nothing: every page is written
// (non-zero, so it cannot be the shared zero page). oom_score_adj 1000 makes the
// hog the host OOM killer's first choice, before any real service.
[[noreturn]] void hog(uint64_t size, int report_fd) {
  (void)write_text_file("/proc/self/oom_score_adj", "1000");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    (void)!::write(report_fd, "E", 1);
    ::_exit(1);
  }
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto* bytes = static_cast<volatile unsigned char*>(p);
  for (uint64_t off = 0; off < size; off += page) bytes[off] = 0x5a;
  (void)!::write(report_fd, "R", 1);
  for (;;) ::pause();
}

}  // namespace

Result<std::unique_ptr<MemoryHog>> MemoryHog::plan(const ResourceSpec& spec) {
  std::unique_ptr<MemoryHog> f(new MemoryHog(spec));
  MemInfo m = meminfo();
  const uint64_t floor = std::max<uint64_t>(256ULL << 20, m.total / 20);
  if (m.available == 0) return make_error(EIO, "memory: cannot read MemAvailable from /proc/meminfo");
  if (spec.size_bytes + floor > m.available)
    return make_error(ERANGE, "--size " + format_bytes(spec.size_bytes) + ": only " + format_bytes(m.available) +
                                  " is available and the host keeps at least " + format_bytes(floor) + " free");
  // The cgroup v2 memory controller where the host has it there; else the v1
  // memory hierarchy (hybrid hosts), under faultctl's own memory cgroup so the hog
  // also stays inside whatever limit faultctl itself runs under.
  const auto& mounts = cgroup_mounts();
  if (v2_has_controller("memory")) {
    f->cgroup_version_ = 2;
    f->parent_dir_ = mounts.v2;
  } else if (mounts.v1.contains("memory")) {
    auto rel = cgroup_of(::getpid(), "memory");
    if (!rel) return rel.error();
    f->cgroup_version_ = 1;
    f->parent_dir_ = mounts.v1.at("memory") + (*rel == "/" ? "" : *rel);
  } else {
    return make_error(
        ENOTSUP, "memory: this host has no memory cgroup controller (v2 or v1); refusing to allocate without a limit");
  }
  return f;
}

nlohmann::json MemoryHog::plan() const {
  nlohmann::json j{{"size_bytes", spec_.size_bytes},
                   {"limit_bytes", spec_.size_bytes + kOverheadBytes},
                   {"cgroup_version", cgroup_version_},
                   {"cgroup_parent", parent_dir_}};
  if (!dir_.empty()) j["cgroup"] = dir_;
  if (hog_) j["hog_pid"] = hog_->identity().pid;
  return j;
}

Status MemoryHog::apply(UndoJournal& journal) {
  dir_ = parent_dir_ + "/faultline-" + journal.state().unique_name();
  const std::string limit = std::to_string(spec_.size_bytes + kOverheadBytes);
  FL_TRY(journal.record(undo::remove_cgroup(dir_)));
  if (cgroup_version_ == 2) {
    // The root may delegate controllers whatever it holds; a child needs memory
    // enabled in its parent's subtree_control to get memory.max.
    FL_TRY(write_text_file(parent_dir_ + "/cgroup.subtree_control", "+memory"));
  }
  if (::mkdir(dir_.c_str(), 0755) != 0) return errno_error("cannot create cgroup " + dir_);
  if (cgroup_version_ == 2) {
    FL_TRY(write_text_file(dir_ + "/memory.max", limit));
    (void)write_text_file(dir_ + "/memory.swap.max", "0");  // absent without swap accounting
    (void)write_text_file(dir_ + "/memory.oom.group", "1");
  } else {
    FL_TRY(write_text_file(dir_ + "/memory.limit_in_bytes", limit));
    struct stat st {};
    if (::stat((dir_ + "/memory.memsw.limit_in_bytes").c_str(), &st) == 0)
      FL_TRY(write_text_file(dir_ + "/memory.memsw.limit_in_bytes", limit));  // no escape into swap
    (void)write_text_file(dir_ + "/memory.swappiness", "0");
  }
  const uint64_t size = spec_.size_bytes;
  auto w = Worker::start("fl-mem-" + journal.state().id, [size](int report) { hog(size, report); });
  if (!w) return w.error();
  hog_.emplace(std::move(*w));
  FL_TRY(journal.record(undo::kill(hog_->identity())));
  FL_TRY(write_text_file(dir_ + "/cgroup.procs", std::to_string(hog_->identity().pid)));
  FL_TRY(hog_->go());
  const int timeout_ms = 10'000 + static_cast<int>(size / (50ULL << 20)) * 1000;  // 50 MB/s at worst
  auto r = hog_->wait_report(timeout_ms);
  if (!r)
    return make_error(r.error().err, "the memory hog could not take " + format_bytes(size) + ": " + r.error().message);
  if (*r != 'R') return make_error(ENOMEM, "the memory hog could not map " + format_bytes(size));
  return {};
}

nlohmann::json MemoryHog::observe() {
  std::string file = dir_ + (cgroup_version_ == 2 ? "/memory.current" : "/memory.usage_in_bytes");
  auto t = read_text_file(file);
  uint64_t usage = t ? std::strtoull(t->c_str(), nullptr, 10) : 0;
  return {{"cgroup", dir_},
          {"usage_bytes", usage},
          {"limit_bytes", spec_.size_bytes + kOverheadBytes},
          {"text", format_bytes(usage) + " held in " + dir_.substr(dir_.rfind('/') + 1) + " (limit " +
                       format_bytes(spec_.size_bytes + kOverheadBytes) + ")"}};
}

Status MemoryHog::check() {
  if (!hog_) return {};
  if (auto how = hog_->exited(); !how.empty())
    return make_error(ECHILD, "the memory hog pid " + std::to_string(hog_->identity().pid) + " ended from outside (" +
                                  how + (how == "killed by signal 9" ? ", the OOM killer or an operator" : "") + ")");
  return {};
}

void MemoryHog::release() {
  if (hog_) hog_->stop();
}

}  // namespace faultline
