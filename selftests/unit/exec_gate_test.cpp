// The exec gate (`faultctl guard --block-dangerous`) on real processes: bash
// and the programs it runs, each exec judged before it happens. Needs no
// root: as a user the filter comes with no_new_privs.
#include "userspace/guard/exec_gate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/child.h"

namespace {

using faultline::ExecGate;
using faultline::ExecGateOptions;
using faultline::ExecJudgement;
using faultline::HeldChild;
namespace fs = std::filesystem;

class ExecGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fl-exec-gate-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/victim/sub");
    std::ofstream(dir_ + "/victim/sub/file") << "keep me\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // bash SCRIPT_FILE under a gate; its exit code. What bash prints goes to out().
  int run_script(const std::string& body, bool enforce) {
    std::ofstream(dir_ + "/script.sh") << "exec >" << dir_ << "/out 2>&1\n" << body;
    ExecGateOptions o;
    o.enforce = enforce;
    o.on_flagged = [this](const ExecJudgement& j) {
      std::lock_guard lock(m_);
      flagged_.push_back(j);
    };
    auto gate = ExecGate::create(o);
    EXPECT_TRUE(gate) << gate.error().describe();
    if (!gate) return -1;
    ExecGate* g = gate->get();
    auto child = HeldChild::spawn(
        {"/bin/bash", dir_ + "/script.sh"}, [g] { return g->install_in_child(); }, "exec_gate_test");
    EXPECT_TRUE(child) << child.error().describe();
    if (!child) return -1;
    g->serve();
    EXPECT_TRUE(child->release());
    const int code = child->wait();
    EXPECT_TRUE(g->installed());
    judged_ = g->judged();
    return code;
  }
  std::string out() const {
    std::ifstream in(dir_ + "/out");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
  std::mutex m_;
  std::vector<ExecJudgement> flagged_;
  uint64_t judged_ = 0;
};

TEST_F(ExecGateTest, EnforcingARiskyExecFailsWithEpermAndNothingIsRemoved) {
  const int code = run_script("rm -rf " + dir_ + "/victim\necho after $?\nls " + dir_ + " >/dev/null\n", true);
  EXPECT_EQ(code, 0) << out();
  EXPECT_TRUE(fs::exists(dir_ + "/victim/sub/file")) << "the gate let rm -rf run";
  EXPECT_NE(out().find("Operation not permitted"), std::string::npos) << out();
  EXPECT_NE(out().find("after 126"), std::string::npos) << out();
  ASSERT_EQ(flagged_.size(), 1U);
  EXPECT_TRUE(flagged_[0].blocked);
  ASSERT_EQ(flagged_[0].risks.size(), 1U);
  EXPECT_EQ(flagged_[0].risks[0].rule, "rm-recursive-force");
  EXPECT_EQ(flagged_[0].words.back(), dir_ + "/victim");
  EXPECT_EQ(judged_, 3U) << "bash, rm and ls: each exec judged";
}

TEST_F(ExecGateTest, MonitorReportsAndLetsItRun) {
  const int code = run_script("rm -rf " + dir_ + "/victim\n", false);
  EXPECT_EQ(code, 0) << out();
  EXPECT_FALSE(fs::exists(dir_ + "/victim"));
  ASSERT_EQ(flagged_.size(), 1U);
  EXPECT_FALSE(flagged_[0].blocked);
  EXPECT_EQ(flagged_[0].risks[0].rule, "rm-recursive-force");
}

TEST_F(ExecGateTest, Argv0CannotDisguiseTheProgram) {
  // bash's exec -a sets argv[0]; the path the kernel runs is what is judged.
  const int code = run_script("(exec -a ls rm -rf " + dir_ + "/victim)\necho after $?\n", true);
  EXPECT_EQ(code, 0) << out();
  EXPECT_TRUE(fs::exists(dir_ + "/victim/sub/file"));
  ASSERT_EQ(flagged_.size(), 1U);
  EXPECT_EQ(fs::path(flagged_[0].words[0]).filename(), "rm");
}

TEST_F(ExecGateTest, ADangerousShellScriptIsRefusedAtItsShellsExec) {
  const int code = run_script("bash -c 'cd " + dir_ + " && git push --force origin main'\necho after $?\n", true);
  EXPECT_EQ(code, 0) << out();
  ASSERT_EQ(flagged_.size(), 1U);
  EXPECT_EQ(flagged_[0].risks[0].rule, "git-push-force");
  EXPECT_EQ(flagged_[0].risks[0].command, "git push --force origin main");
  EXPECT_NE(out().find("after 126"), std::string::npos) << out();
}

TEST_F(ExecGateTest, SafeCommandsRunUnreported) {
  const int code = run_script("ls " + dir_ + " >/dev/null && cat " + dir_ + "/victim/sub/file\n", true);
  EXPECT_EQ(code, 0) << out();
  EXPECT_NE(out().find("keep me"), std::string::npos);
  EXPECT_TRUE(flagged_.empty());
  EXPECT_EQ(judged_, 3U);
}

}  // namespace
