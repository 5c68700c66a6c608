// faultctl run memory: the memory shows in the hog's own cgroup, within its limit, and is released.
#include "resource_env.h"

namespace flres {
namespace {

class MemoryHog : public ResourceTest {};

uint64_t number(const std::string& path) { return std::strtoull(read_file(path).c_str(), nullptr, 10); }

std::string usage_file(const std::string& cgroup) {
  return path_exists(cgroup + "/memory.current") ? cgroup + "/memory.current" : cgroup + "/memory.usage_in_bytes";
}
std::string limit_file(const std::string& cgroup) {
  return path_exists(cgroup + "/memory.max") ? cgroup + "/memory.max" : cgroup + "/memory.limit_in_bytes";
}

TEST_F(MemoryHog, HeldInItsCgroupAndReleased) {
  const uint64_t size = 64ULL << 20;
  auto f = start({"run", "memory", "--size", "64MiB", "--duration", "3s", "--json"});
  auto started = wait_event(*f, "started", 20s);
  ASSERT_TRUE(started) << f->describe();
  const std::string cg = (*started)["plan"]["cgroup"];
  const pid_t hog = (*started)["plan"]["hog_pid"];
  ASSERT_TRUE(path_exists(cg)) << cg;
  EXPECT_NE(read_file(cg + "/cgroup.procs").find(std::to_string(hog)), std::string::npos)
      << "the hog is not in its cgroup";
  uint64_t usage = number(usage_file(cg)), limit = number(limit_file(cg));
  EXPECT_GE(usage, size) << "every page is touched, so the cgroup is charged the whole size";
  EXPECT_LE(usage, limit);
  EXPECT_EQ(limit, size + (16ULL << 20)) << "the limit is the size plus the hog's small overhead";
  EXPECT_EQ(read_file("/proc/" + std::to_string(hog) + "/oom_score_adj"), "1000\n") << "the OOM killer's first choice";

  auto o = f->wait(10s);
  ASSERT_TRUE(o && o->code == 0) << f->describe();
  EXPECT_FALSE(pid_alive(hog));
  EXPECT_FALSE(path_exists(cg)) << "the cgroup outlived the fault";
}

TEST_F(MemoryHog, ReleasedWhenFaultctlIsKilled) {
  auto f = start({"run", "memory", "--size", "32MiB", "--duration", "3s", "--json"});
  auto started = wait_event(*f, "started", 20s);
  ASSERT_TRUE(started) << f->describe();
  const std::string cg = (*started)["plan"]["cgroup"];
  const pid_t hog = (*started)["plan"]["hog_pid"];
  f->kill_and_reap();
  EXPECT_TRUE(eventually([&] { return !pid_alive(hog); }, 1000ms)) << "the hog outlived faultctl";
  EXPECT_TRUE(eventually([&] { return !path_exists(cg); }, 3s + kGrace + 1000ms))
      << "the reaper left the cgroup " << cg;
  EXPECT_TRUE(eventually([&] { return state_files().empty(); }, 1000ms));
}

TEST_F(MemoryHog, AbortReleasesAtOnce) {
  auto f = start({"run", "memory", "--size", "32MiB", "--duration", "60s", "--json"});
  auto started = wait_event(*f, "started", 20s);
  ASSERT_TRUE(started) << f->describe();
  const std::string cg = (*started)["plan"]["cgroup"];
  auto a = run({"abort", (*started)["id"].get<std::string>()});
  EXPECT_EQ(a.status.code, 0) << a.describe();
  EXPECT_FALSE(path_exists(cg)) << "abort returned before the cgroup was gone";
  ASSERT_TRUE(f->wait(5s)) << f->describe();
}

}  // namespace
}  // namespace flres
