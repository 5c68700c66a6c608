// Bad input through the real binary: one line naming the flag, exit 2, and nothing applied.
#include <unistd.h>

#include <fstream>

#include "resource_env.h"

namespace flres {
namespace {

class BadInput : public ResourceTest {
 protected:
  void SetUp() override {
    ResourceTest::SetUp();
    if (IsSkipped()) return;
    fs_.emplace(dir_ + "/mnt", "64m");
    target_.emplace();
  }
  void TearDown() override {
    target_.reset();
    fs_.reset();
    ResourceTest::TearDown();
  }

  // Runs one bad command and checks the whole contract.
  void expect_refused(const std::vector<std::string>& args, const std::string& flag) {
    std::vector<std::string> full = {"run"};
    full.insert(full.end(), args.begin(), args.end());
    auto o = run(full, 20s);
    SCOPED_TRACE(o.describe());
    EXPECT_EQ(o.status.code, 2);
    EXPECT_NE(o.err.find(flag), std::string::npos) << "the error does not name " << flag;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << "not exactly one line";
    EXPECT_TRUE(o.out.empty());
    // Nothing applied: no state, no balloon, the target not stopped, no worker, no cgroup.
    EXPECT_TRUE(state_files().empty());
    EXPECT_TRUE(fs_->files().empty());
    EXPECT_NE(target_->state(), 'T');
    EXPECT_EQ(read_file("/proc/" + std::to_string(target_->pid()) + "/stat").empty(), false);
    ++checked_;
  }
  std::optional<Tmpfs> fs_;
  std::optional<Counter> target_;
  int checked_ = 0;
};

TEST_F(BadInput, SyntaxAndRanges) {
  const std::string mnt = fs_->path();
  const std::string pid = std::to_string(target_->pid());
  expect_refused({"cpu", "--cores", "1"}, "--duration");
  expect_refused({"cpu", "--cores", "1", "--duration", "61m"}, "--duration");
  expect_refused({"cpu", "--cores", "1", "--duration", "30"}, "--duration");
  expect_refused({"cpu", "--duration", "5s"}, "--cores");
  expect_refused({"cpu", "--cores", "0", "--duration", "5s"}, "--cores");
  expect_refused({"cpu", "--cores", "1", "--load", "150", "--duration", "5s"}, "--load");
  expect_refused({"cpu", "--cores", "1", "--path", mnt, "--duration", "5s"}, "--path");
  expect_refused({"memory", "--size", "lots", "--duration", "5s"}, "--size");
  expect_refused({"memory", "--duration", "5s"}, "--size");
  expect_refused({"disk", "--path", mnt, "--fill", "100%", "--duration", "5s"}, "--fill");
  expect_refused({"disk", "--path", mnt, "--fill", "50%", "--size", "1MiB", "--duration", "5s"}, "--fill");
  expect_refused({"disk", "--path", mnt, "--duration", "5s"}, "--fill");
  expect_refused({"process", "--pid", pid, "--duration", "5s"}, "--action");
  expect_refused({"process", "--pid", pid, "--action", "pause", "--duration", "5s"}, "--action");
  expect_refused({"process", "--pid", pid, "--name", "x", "--action", "freeze", "--duration", "5s"}, "--pid");
  expect_refused({"process", "--pid", pid, "--action", "freeze", "--signal", "TERM", "--duration", "5s"}, "--signal");
  expect_refused({"process", "--pid", pid, "--action", "kill", "--signal", "SIGNOPE", "--duration", "5s"}, "--signal");
  expect_refused({"process", "--pid", pid, "--action", "kill", "--duration", "5s", "--health-url", "ftp://x/"},
                 "--health-url");
  expect_refused({"cpu", "--cores", "1", "--duration", "5s", "--slo", "p99<1s"}, "--slo");
  expect_refused({"cpu", "--cores", "1", "--duration", "5s", "--record", dir_ + "/rec", "--hypothesis", "h"},
                 "--record");
  EXPECT_GE(checked_, 20);
}

TEST_F(BadInput, AgainstTheRunningSystem) {
  const std::string mnt = fs_->path();
  std::ofstream(dir_ + "/plain-file") << "x";
  std::filesystem::create_directories(dir_ + "/full-record");
  std::ofstream(dir_ + "/full-record/x") << "x";
  const std::string self = std::to_string(::getpid());  // an ancestor of faultctl
  expect_refused({"process", "--pid", "1", "--action", "freeze", "--duration", "5s"}, "--pid 1");
  expect_refused({"process", "--pid", self, "--action", "kill", "--duration", "5s"}, "--pid " + self);
  expect_refused({"process", "--pid", "2", "--action", "freeze", "--duration", "5s"}, "--pid 2");
  expect_refused({"process", "--pid", "4000000", "--action", "kill", "--duration", "5s"}, "--pid 4000000");
  expect_refused({"process", "--name", "no-such-process-name-xyz", "--action", "kill", "--duration", "5s"}, "--name");
  expect_refused({"process", "--name", "([", "--action", "kill", "--duration", "5s"}, "--name");
  expect_refused({"process", "--cgroup", "/no-such-cgroup-xyz", "--action", "freeze", "--duration", "5s"}, "--cgroup");
  expect_refused({"process", "--cgroup", "/", "--action", "freeze", "--duration", "5s"}, "--cgroup");
  expect_refused({"cpu", "--cores", "4096", "--duration", "5s"}, "--cores");
  expect_refused({"cpu", "--cores", "1", "--cgroup", "/no-such-cgroup-xyz", "--duration", "5s"}, "--cgroup");
  expect_refused({"memory", "--size", "100TiB", "--duration", "5s"}, "--size");
  expect_refused({"disk", "--path", dir_ + "/no-such-dir", "--fill", "50%", "--duration", "5s"}, "--path");
  expect_refused({"disk", "--path", dir_ + "/plain-file", "--fill", "50%", "--duration", "5s"}, "--path");
  expect_refused({"disk", "--path", "/proc", "--fill", "50%", "--duration", "5s"}, "--path");
  expect_refused({"disk", "--path", mnt, "--fill", "99%", "--min-free", "4MiB", "--duration", "5s"}, "--min-free");
  expect_refused({"disk", "--path", mnt, "--fill", "50%", "--duration", "5s"}, "--min-free");  // default floor 256MiB
  expect_refused({"disk", "--path", mnt, "--size", "80MiB", "--min-free", "1MiB", "--duration", "5s"}, "--size");
  expect_refused({"cpu", "--cores", "1", "--duration", "5s", "--health-url", "http://127.0.0.1:1/", "--hypothesis", "h",
                  "--record", dir_ + "/full-record"},
                 "--record");
  // A process that is stopped already is not ours to resume at the end.
  ::kill(target_->pid(), SIGSTOP);
  ASSERT_TRUE(eventually([&] { return target_->state() == 'T'; }, 1000ms));
  auto o = run({"run", "process", "--pid", std::to_string(target_->pid()), "--action", "freeze", "--duration", "5s"});
  EXPECT_EQ(o.status.code, 2) << o.describe();
  EXPECT_NE(o.err.find("already stopped"), std::string::npos) << o.describe();
  ::kill(target_->pid(), SIGCONT);
  EXPECT_GE(checked_, 18);
}

}  // namespace
}  // namespace flres

namespace flres {
namespace {

TEST_F(BadInput, ReportRefusesWhatIsNotARecord) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"report"},
                                                                {"report", dir_ + "/none"},
                                                                {"report", "--verify", dir_ + "/none"},
                                                                {"report", "--bogus", dir_},
                                                                {"report", dir_, dir_}}) {
    auto o = run(args);
    EXPECT_EQ(o.status.code, 2) << o.describe();
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.describe();
  }
}

}  // namespace
}  // namespace flres
