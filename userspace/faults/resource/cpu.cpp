// CpuBurn: one pinned worker per core, each burning its share of every 100 ms period.
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <sstream>

#include "base/cgroup.h"
#include "userspace/faults/resource/fault.h"

namespace faultline {
namespace {

constexpr uint64_t kPeriodNs = 100'000'000ULL;

uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// The duty cycle counts CPU time, not wall time: on a busy core the burner gets
// preempted, and counting wall time would then burn less than asked while
// claiming more. A period it cannot fill is simply left short.
[[noreturn]] void burn(double load) {
  const uint64_t busy = static_cast<uint64_t>(std::llround(load / 100.0 * static_cast<double>(kPeriodNs)));
  volatile uint64_t sink = 0;
  for (uint64_t period_start = clock_ns(CLOCK_MONOTONIC);; period_start += kPeriodNs) {
    const uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    while (clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0 < busy && clock_ns(CLOCK_MONOTONIC) - period_start < kPeriodNs) {
      for (int i = 0; i < 1000; ++i) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
    }
    uint64_t next = period_start + kPeriodNs;
    uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (now > next + kPeriodNs) period_start = now - kPeriodNs;  // fell behind: do not try to catch up
    if (load < 100) {
      timespec ts{static_cast<time_t>(next / 1'000'000'000ULL), static_cast<long>(next % 1'000'000'000ULL)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    }
  }
}

}  // namespace

Result<std::unique_ptr<CpuBurn>> CpuBurn::plan(const ResourceSpec& spec) {
  std::unique_ptr<CpuBurn> f(new CpuBurn(spec));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return errno_error("cannot read faultctl's CPU affinity");
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) allowed.push_back(c);
  }
  if (spec.cores > allowed.size())
    return make_error(ERANGE, "--cores " + std::to_string(spec.cores) + ": only " + std::to_string(allowed.size()) +
                                  " CPUs are available to faultctl");
  f->cores_.assign(allowed.begin(), allowed.begin() + spec.cores);
  if (!spec.cgroup.empty()) {
    auto dir = resolve_cgroup_v2_dir(spec.cgroup, "--cgroup");
    if (!dir) return dir.error();
    f->cgroup_dir_ = *dir;
  }
  return f;
}

nlohmann::json CpuBurn::plan() const {
  nlohmann::json j{{"cores", cores_}, {"load_percent", spec_.load}, {"period_ms", kPeriodNs / 1'000'000}};
  if (!cgroup_dir_.empty()) j["cgroup"] = cgroup_dir_;
  j["workers"] = nlohmann::json::array();
  for (const auto& w : workers_) j["workers"].push_back(w.identity().pid);
  return j;
}

Status CpuBurn::apply(UndoJournal& journal) {
  const double load = spec_.load;
  for (int core : cores_) {
    auto w = Worker::start("fl-cpu-" + std::to_string(core), [load](int) { burn(load); });
    if (!w) return w.error();
    workers_.push_back(std::move(*w));
    Worker& worker = workers_.back();
    FL_TRY(journal.record(undo::kill(worker.identity())));
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    if (::sched_setaffinity(worker.identity().pid, sizeof(one), &one) != 0)
      return errno_error("cannot pin the worker to CPU " + std::to_string(core));
    if (!cgroup_dir_.empty())
      FL_TRY(write_text_file(cgroup_dir_ + "/cgroup.procs", std::to_string(worker.identity().pid)));
    FL_TRY(worker.go());
  }
  last_ns_ = first_ns_ = clock_ns(CLOCK_MONOTONIC);
  for (const auto& w : workers_) {
    auto p = read_process(w.identity().pid);
    last_ticks_.push_back(p ? p->utime + p->stime : 0);
  }
  first_ticks_ = last_ticks_;
  return {};
}

nlohmann::json CpuBurn::observe() {
  const uint64_t now = clock_ns(CLOCK_MONOTONIC);
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double wall_s = static_cast<double>(now - last_ns_) / 1e9;
  const double run_s = static_cast<double>(now - first_ns_) / 1e9;
  nlohmann::json ws = nlohmann::json::array();
  double sum = 0, run_sum = 0;
  for (size_t i = 0; i < workers_.size(); ++i) {
    auto p = read_process(workers_[i].identity().pid);
    uint64_t ticks = p ? p->utime + p->stime : last_ticks_[i];
    double pct =
        wall_s > 0 && ticks >= last_ticks_[i] ? (static_cast<double>(ticks - last_ticks_[i]) / hz) / wall_s * 100 : 0;
    if (run_s > 0 && ticks >= first_ticks_[i])
      run_sum += (static_cast<double>(ticks - first_ticks_[i]) / hz) / run_s * 100;
    last_ticks_[i] = ticks;
    sum += pct;
    ws.push_back(
        {{"pid", workers_[i].identity().pid}, {"core", cores_[i]}, {"cpu_percent", std::round(pct * 10) / 10}});
  }
  last_ns_ = now;
  const double n = workers_.empty() ? 1 : static_cast<double>(workers_.size());
  const double avg = sum / n, run_avg = run_sum / n;
  std::ostringstream t;
  t.precision(1);
  t << std::fixed << workers_.size() << (workers_.size() == 1 ? " worker" : " workers") << " at " << avg << "% now, "
    << run_avg << "% over the run (target " << spec_.load << "%)";
  return {{"workers", ws},
          {"cpu_percent_avg", std::round(avg * 10) / 10},
          {"cpu_percent_run", std::round(run_avg * 10) / 10},
          {"text", t.str()}};
}

Status CpuBurn::check() {
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (auto how = workers_[i].exited(); !how.empty())
      return make_error(ECHILD, "cpu worker pid " + std::to_string(workers_[i].identity().pid) + " on CPU " +
                                    std::to_string(cores_[i]) + " ended from outside (" + how + ")");
  }
  return {};
}

void CpuBurn::release() {
  for (auto& w : workers_) w.stop();
}

}  // namespace faultline
