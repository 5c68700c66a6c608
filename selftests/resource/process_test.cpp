// faultctl run process: a frozen process does not advance and resumes at the end, abort and kill -9.
#include <signal.h>

#include "resource_env.h"

namespace flres {
namespace {

class ProcessFault : public ResourceTest {};

// The counter must stand still for a whole second while frozen.
void expect_frozen(const Counter& c) {
  uint64_t before = c.value();
  sleep_for(1000ms);
  EXPECT_EQ(c.value(), before) << "a frozen process advanced";
}

void expect_running(const Counter& c) {
  uint64_t before = c.value();
  EXPECT_TRUE(eventually([&] { return c.value() > before + 10; }, 2000ms)) << "the process did not resume";
}

TEST_F(ProcessFault, FreezeByPidStopsAndResumesAtTheEnd) {
  Counter target;
  expect_running(target);
  auto f = start(
      {"run", "process", "--pid", std::to_string(target.pid()), "--action", "freeze", "--duration", "3s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  EXPECT_EQ((*started)["plan"]["targets"][0]["method"], "sigstop") << "the target shares the root cgroup: SIGSTOP";
  EXPECT_EQ(target.state(), 'T');
  expect_frozen(target);
  auto o = f->wait(10s);
  ASSERT_TRUE(o) << f->describe();
  EXPECT_EQ(o->code, 0) << f->describe();
  expect_running(target);
  EXPECT_TRUE(state_files().empty());
}

TEST_F(ProcessFault, FreezeByCgroupUsesCgroupFreeze) {
  Counter target;
  TestCgroup cg(unique("freeze"));
  cg.add(target.pid());
  auto f = start({"run", "process", "--cgroup", cg.path(), "--action", "freeze", "--duration", "3s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  EXPECT_EQ((*started)["plan"]["targets"][0]["method"], "cgroup-freeze");
  EXPECT_TRUE(cg.frozen()) << "cgroup.events does not say frozen";
  expect_frozen(target);
  auto o = f->wait(10s);
  ASSERT_TRUE(o && o->code == 0) << f->describe();
  EXPECT_FALSE(cg.frozen());
  expect_running(target);
}

// A target alone in a cgroup of its own is frozen through the cgroup, not SIGSTOP.
TEST_F(ProcessFault, PidWithACgroupOfItsOwnUsesCgroupFreeze) {
  Counter target;
  TestCgroup cg(unique("own"));
  cg.add(target.pid());
  auto o = run({"run", "process", "--pid", std::to_string(target.pid()), "--action", "freeze", "--duration", "2s",
                "--dry-run", "--json"});
  ASSERT_EQ(o.status.code, 0) << o.describe();
  auto j = json_lines(o.out);
  ASSERT_EQ(j.size(), 1u) << o.describe();
  EXPECT_EQ(j[0]["plan"]["targets"][0]["method"], "cgroup-freeze");
  EXPECT_EQ(j[0]["plan"]["targets"][0]["cgroup"], cg.path());
  EXPECT_FALSE(cg.frozen()) << "--dry-run changed something";
  EXPECT_NE(target.state(), 'T');
}

TEST_F(ProcessFault, FreezeByNameMatchesTheWholeName) {
  std::string name = "flt" + std::to_string(::getpid() % 100000);
  Counter target(name);
  Counter bystander(name + "x");  // a longer name: a whole-name pattern must not match it
  auto f = start({"run", "process", "--name", name, "--action", "freeze", "--duration", "2s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  ASSERT_EQ((*started)["plan"]["targets"].size(), 1u) << started->dump();
  EXPECT_EQ((*started)["plan"]["targets"][0]["pid"], target.pid());
  EXPECT_EQ(target.state(), 'T');
  EXPECT_NE(bystander.state(), 'T');
  ASSERT_TRUE(f->wait(10s)) << f->describe();
  expect_running(target);
}

TEST_F(ProcessFault, KillSendsOneSignal) {
  Counter target;
  auto o = run({"run", "process", "--pid", std::to_string(target.pid()), "--action", "kill", "--signal", "TERM",
                "--duration", "1s"});
  EXPECT_EQ(o.status.code, 0) << o.describe();
  std::optional<int> sig;
  ASSERT_TRUE(eventually([&] { return (sig = target.ended_by_signal()).has_value(); }, 2000ms)) << "still running";
  EXPECT_EQ(*sig, SIGTERM);
}

TEST_F(ProcessFault, AbortResumesAtOnce) {
  Counter target;
  auto f = start(
      {"run", "process", "--pid", std::to_string(target.pid()), "--action", "freeze", "--duration", "60s", "--json"});
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  const std::string id = (*started)["id"];
  auto status = run({"status", "--json"});
  ASSERT_EQ(status.status.code, 0) << status.describe();
  auto sj = json_lines(status.out);
  ASSERT_EQ(sj.size(), 1u) << status.describe();
  ASSERT_EQ(sj[0]["resource_faults"].size(), 1u) << status.describe();
  EXPECT_EQ(sj[0]["resource_faults"][0]["id"], id);
  EXPECT_TRUE(sj[0]["resource_faults"][0]["reaper_alive"].get<bool>());
  auto a = run({"abort", id});
  EXPECT_EQ(a.status.code, 0) << a.describe();
  expect_running(target);
  auto o = f->wait(5s);
  ASSERT_TRUE(o) << f->describe();
  EXPECT_EQ(o->code, 1) << "the owner reports it was ended from outside: " << f->describe();
  EXPECT_NE(f->out().find("\"reason\":\"aborted\""), std::string::npos) << f->describe();
}

// kill -9 of faultctl: the process stays frozen until expiry, then the reaper resumes it.
TEST_F(ProcessFault, ReaperResumesAfterFaultctlIsKilled) {
  Counter target;
  auto f = start(
      {"run", "process", "--pid", std::to_string(target.pid()), "--action", "freeze", "--duration", "4s", "--json"});
  ASSERT_TRUE(wait_event(*f, "started", 10s)) << f->describe();
  auto t0 = std::chrono::steady_clock::now();
  f->kill_and_reap();
  sleep_for(1500ms);
  EXPECT_EQ(target.state(), 'T') << "the fault must outlive faultctl until its expiry";
  expect_frozen(target);
  ASSERT_TRUE(eventually([&] { return target.state() != 'T'; }, 4s + kGrace + 1000ms))
      << "not resumed by expiry + grace after kill -9 of faultctl";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 3500ms) << "resumed before its expiry";
  expect_running(target);
  EXPECT_TRUE(eventually([&] { return state_files().empty(); }, 1000ms));
}

}  // namespace
}  // namespace flres
