// faultctl run disk on a 64 MB tmpfs: the fill level is reached and the balloon goes at the end,
// at abort, after kill -9 (the reaper), and after the reaper is killed too (the next faultctl).
#include <signal.h>

#include "resource_env.h"

namespace flres {
namespace {

class DiskFill : public ResourceTest {
 protected:
  void SetUp() override {
    ResourceTest::SetUp();
    if (IsSkipped()) return;
    fs_.emplace(dir_ + "/mnt", "64m");
  }
  void TearDown() override {
    fs_.reset();
    ResourceTest::TearDown();
  }
  [[nodiscard]] bool has_balloon() const {
    for (const auto& f : fs_->files()) {
      if (f.rfind(".faultline-balloon-", 0) == 0) return true;
    }
    return false;
  }
  std::vector<std::string> fill(const std::string& percent, const std::string& duration) {
    return {"run",        "disk", "--path",     fs_->path(), "--fill", percent,
            "--min-free", "4MiB", "--duration", duration,    "--json"};
  }
  std::optional<Tmpfs> fs_;
};

TEST_F(DiskFill, ReachesTheFillLevelAndDeletesTheBalloon) {
  EXPECT_LT(fs_->use_percent(), 1);
  auto f = start(fill("75%", "3s"));
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  double use = fs_->use_percent();
  EXPECT_GE(use, 74.5) << "statvfs says " << use << "%";
  EXPECT_LE(use, 77.0) << "statvfs says " << use << "%";
  EXPECT_TRUE(has_balloon());
  auto o = f->wait(10s);
  ASSERT_TRUE(o && o->code == 0) << f->describe();
  EXPECT_FALSE(has_balloon());
  EXPECT_LT(fs_->use_percent(), 1) << "space not given back";
}

TEST_F(DiskFill, SizeAddsThatMuch) {
  double before = fs_->use_percent();
  auto f = start(
      {"run", "disk", "--path", fs_->path(), "--size", "16MiB", "--min-free", "4MiB", "--duration", "2s", "--json"});
  ASSERT_TRUE(wait_event(*f, "started", 10s)) << f->describe();
  EXPECT_NEAR(fs_->use_percent() - before, 25.0, 0.5) << "16MiB of 64MiB";
  ASSERT_TRUE(f->wait(10s)) << f->describe();
  EXPECT_FALSE(has_balloon());
}

TEST_F(DiskFill, AbortDeletesTheBalloon) {
  auto f = start(fill("60%", "60s"));
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  ASSERT_TRUE(has_balloon());
  auto a = run({"abort", (*started)["id"].get<std::string>()});
  EXPECT_EQ(a.status.code, 0) << a.describe();
  EXPECT_FALSE(has_balloon());
  ASSERT_TRUE(f->wait(5s)) << f->describe();
}

TEST_F(DiskFill, StatusListsItAndAbortAllEndsEveryResourceFault) {
  auto disk = start(fill("60%", "60s"));
  auto d = wait_event(*disk, "started", 10s);
  ASSERT_TRUE(d) << disk->describe();
  auto cpu = start({"run", "cpu", "--cores", "1", "--load", "10", "--duration", "60s", "--json"});
  auto c = wait_event(*cpu, "started", 10s);
  ASSERT_TRUE(c) << cpu->describe();
  auto s = run({"status"});
  EXPECT_EQ(s.status.code, 0) << s.describe();
  EXPECT_NE(s.out.find((*d)["id"].get<std::string>() + "    disk"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find((*c)["id"].get<std::string>() + "    cpu"), std::string::npos) << s.out;
  auto a = run({"abort", "--all"});
  EXPECT_EQ(a.status.code, 0) << a.describe();
  EXPECT_NE(a.out.find("2 resource faults reverted"), std::string::npos) << a.describe();
  EXPECT_FALSE(has_balloon());
  for (const auto& w : (*c)["plan"]["workers"])
    EXPECT_TRUE(eventually([&] { return !pid_alive(w.get<pid_t>()); }, 2000ms));
  EXPECT_TRUE(state_files().empty());
  ASSERT_TRUE(disk->wait(5s)) << disk->describe();
  ASSERT_TRUE(cpu->wait(5s)) << cpu->describe();
}

TEST_F(DiskFill, SigintRevertsAtOnce) {
  auto f = start(fill("60%", "60s"));
  ASSERT_TRUE(wait_event(*f, "started", 10s)) << f->describe();
  ::kill(f->pid(), SIGINT);
  auto o = f->wait(5s);
  ASSERT_TRUE(o) << f->describe();
  EXPECT_EQ(o->code, 1) << f->describe();
  EXPECT_FALSE(has_balloon());
  EXPECT_TRUE(state_files().empty());
}

// kill -9 of faultctl: the fault holds until its expiry, then the reaper ends it.
TEST_F(DiskFill, ReaperEndsItAfterFaultctlIsKilled) {
  auto f = start(fill("60%", "3s"));
  ASSERT_TRUE(wait_event(*f, "started", 10s)) << f->describe();
  auto t0 = std::chrono::steady_clock::now();
  f->kill_and_reap();
  sleep_for(2000ms);
  EXPECT_TRUE(has_balloon()) << "the fault must hold until its expiry";
  ASSERT_TRUE(eventually([&] { return !has_balloon(); }, 1000ms + kGrace + 1000ms)) << "not ended by expiry + grace";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 2500ms);
  EXPECT_TRUE(eventually([&] { return state_files().empty(); }, 1000ms));
}

// SIGTERM to the reaper (an orderly shutdown) reverts at once rather than leaving the fault.
TEST_F(DiskFill, ReaperRevertsOnSigterm) {
  auto f = start(fill("60%", "60s"));
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  f->kill_and_reap();
  ::kill((*started)["reaper_pid"].get<pid_t>(), SIGTERM);
  // The state goes last, once the revert is complete (an unlink of a big file takes a moment).
  EXPECT_TRUE(eventually([&] { return state_files().empty(); }, 2000ms));
  EXPECT_FALSE(has_balloon());
}

// The reaper killed too: nothing reverts until the next faultctl, whichever command it runs.
TEST_F(DiskFill, NextFaultctlRevertsWhenTheReaperIsKilledToo) {
  auto f = start(fill("60%", "2s"));
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  const pid_t reaper = (*started)["reaper_pid"];
  ASSERT_TRUE(pid_alive(reaper));
  f->kill_and_reap();
  ::kill(reaper, SIGKILL);
  ASSERT_TRUE(eventually([&] { return !pid_alive(reaper); }, 1000ms));
  sleep_for(2000ms + kGrace + 500ms);
  ASSERT_TRUE(has_balloon()) << "something other than faultctl reverted it (the test would prove nothing)";
  auto s = run({"status"});
  EXPECT_EQ(s.status.code, 0) << s.describe();
  EXPECT_NE(s.err.find("reverted fault " + (*started)["id"].get<std::string>()), std::string::npos) << s.describe();
  EXPECT_NE(s.err.find("reaper is gone"), std::string::npos) << s.describe();
  EXPECT_FALSE(has_balloon());
  EXPECT_TRUE(state_files().empty());
}

// The reaper killed while the fault is still due later: the next faultctl arms a new one.
TEST_F(DiskFill, NextFaultctlRearmsALostReaper) {
  auto f = start(fill("60%", "4s"));
  auto started = wait_event(*f, "started", 10s);
  ASSERT_TRUE(started) << f->describe();
  const pid_t reaper = (*started)["reaper_pid"];
  f->kill_and_reap();
  ::kill(reaper, SIGKILL);
  ASSERT_TRUE(eventually([&] { return !pid_alive(reaper); }, 1000ms));
  auto s = run({"status", "--json"});
  EXPECT_NE(s.err.find("started a new one"), std::string::npos) << s.describe();
  auto j = json_lines(s.out);
  ASSERT_EQ(j.size(), 1u) << s.describe();
  ASSERT_EQ(j[0]["resource_faults"].size(), 1u) << s.describe();
  EXPECT_TRUE(j[0]["resource_faults"][0]["reaper_alive"].get<bool>()) << s.describe();
  EXPECT_NE(j[0]["resource_faults"][0]["reaper_pid"], reaper);
  EXPECT_TRUE(has_balloon()) << "re-arming must not end the fault early";
  EXPECT_TRUE(eventually([&] { return !has_balloon(); }, 4s + kGrace + 1000ms)) << "the new reaper did not end it";
  EXPECT_TRUE(eventually([&] { return state_files().empty(); }, 1000ms));
}

}  // namespace
}  // namespace flres
