// faultctl run cpu: the burn shows in /proc/stat within bounds, and stops at the end, at abort, and with faultctl.
#include <unistd.h>

#include "resource_env.h"

namespace flres {
namespace {

class CpuBurn : public ResourceTest {};

uint64_t cpu_ticks(pid_t pid) {
  std::string s = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::vector<std::string> f;
  for (std::string w; in >> w && f.size() < 13;) f.push_back(w);
  return f.size() < 13 ? 0 : std::stoull(f[11]) + std::stoull(f[12]);
}

std::vector<pid_t> workers_of(const nlohmann::json& started) {
  std::vector<pid_t> out;
  for (const auto& w : started["plan"]["workers"]) out.push_back(w.get<pid_t>());
  return out;
}

TEST_F(CpuBurn, ShowsInProcStatWithinBounds) {
  const double load = 50;
  auto f = start({"run", "cpu", "--cores", "1", "--load", "50", "--duration", "6s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  const int core = (*started)["plan"]["cores"][0];
  auto workers = workers_of(*started);
  ASSERT_EQ(workers.size(), 1u) << started->dump();
  const pid_t w = workers[0];
  EXPECT_EQ(read_file("/proc/" + std::to_string(w) + "/comm"), "fl-cpu-" + std::to_string(core) + "\n");
  sleep_for(1000ms);  // past the first period

  CpuTimes a = cpu_times(core);
  uint64_t wa = cpu_ticks(w);
  auto t0 = std::chrono::steady_clock::now();
  sleep_for(3000ms);
  CpuTimes b = cpu_times(core);
  uint64_t wb = cpu_ticks(w);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double core_busy = 100.0 * static_cast<double>(b.busy - a.busy) / static_cast<double>(b.total - a.total);
  double own = 100.0 * static_cast<double>(wb - wa) / static_cast<double>(::sysconf(_SC_CLK_TCK)) / secs;
  // Lower bounds allow for other work on a shared machine taking the core from us;
  // the upper bound is on the worker's own time, which other work cannot inflate.
  EXPECT_GE(core_busy, load - 15) << "/proc/stat: cpu" << core << " was only " << core_busy << "% busy";
  EXPECT_GE(own, load - 20) << "the worker burned " << own << "%";
  EXPECT_LE(own, load + 12) << "the worker burned " << own << "%, more than its duty cycle";

  auto o = f->wait(10s);
  ASSERT_TRUE(o && o->code == 0) << f->describe();
  EXPECT_FALSE(pid_alive(w)) << "the worker outlived the fault";
}

TEST_F(CpuBurn, AbortStopsTheWorkers) {
  auto f = start({"run", "cpu", "--cores", "1", "--load", "20", "--duration", "60s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  auto workers = workers_of(*started);
  ASSERT_FALSE(workers.empty());
  auto a = run({"abort", (*started)["id"].get<std::string>()});
  EXPECT_EQ(a.status.code, 0) << a.describe();
  for (pid_t w : workers)
    EXPECT_TRUE(eventually([&] { return !pid_alive(w); }, 2000ms)) << "worker " << w << " still runs";
  auto o = f->wait(5s);
  ASSERT_TRUE(o) << f->describe();
  EXPECT_EQ(o->code, 1) << f->describe();
}

// PR_SET_PDEATHSIG: the burn stops the moment faultctl dies; the reaper then drops the state.
TEST_F(CpuBurn, WorkersDieWithFaultctl) {
  auto f = start({"run", "cpu", "--cores", "1", "--load", "30", "--duration", "3s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  auto workers = workers_of(*started);
  ASSERT_FALSE(workers.empty());
  f->kill_and_reap();
  for (pid_t w : workers)
    EXPECT_TRUE(eventually([&] { return !pid_alive(w); }, 1000ms)) << "worker " << w << " outlived faultctl";
  EXPECT_FALSE(state_files().empty()) << "the state stays until the reaper is due";
  EXPECT_TRUE(eventually([&] { return state_files().empty(); }, 3s + kGrace + 1000ms)) << "the reaper did not clean up";
}

}  // namespace
}  // namespace flres
