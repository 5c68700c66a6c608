// --approve-dangerous's terminal question, on a real pseudo-terminal: the
// answer typed decides, a decision made elsewhere withdraws the question, a
// closed terminal leaves the holds to the queue; and its flag's bad values.
#include "ctl/guard_exec_prompt.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include "ctl/guard_args.h"

namespace faultline {
namespace {

using namespace std::chrono_literals;

TEST(ExecPromptAnswers, WordsAndLettersInAnyCase) {
  EXPECT_EQ(parse_prompt_answer("o"), PromptAnswer::Once);
  EXPECT_EQ(parse_prompt_answer(" Yes "), PromptAnswer::Once);
  EXPECT_EQ(parse_prompt_answer("A"), PromptAnswer::Always);
  EXPECT_EQ(parse_prompt_answer("always"), PromptAnswer::Always);
  EXPECT_EQ(parse_prompt_answer("d"), PromptAnswer::Deny);
  EXPECT_EQ(parse_prompt_answer("no"), PromptAnswer::Deny);
  EXPECT_FALSE(parse_prompt_answer(""));
  EXPECT_FALSE(parse_prompt_answer("ok"));
  EXPECT_FALSE(parse_prompt_answer("always allow"));
}

// A pseudo-terminal: the prompt opens the side a program would have as its
// terminal; the test types on the other.
class Pty {
 public:
  Pty() {
    char name[64] = {};
    EXPECT_EQ(::openpty(&master_, &slave_, name, nullptr, nullptr), 0);
    name_ = name;
  }
  ~Pty() {
    if (master_ >= 0) ::close(master_);
    if (slave_ >= 0) ::close(slave_);
  }
  const std::string& name() const { return name_; }
  void type(const std::string& s) const { ASSERT_EQ(::write(master_, s.data(), s.size()), ssize_t(s.size())); }
  // What the terminal showed, until `needle` appears (or 10 s).
  bool shows(const std::string& needle) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (seen_.find(needle) == std::string::npos) {
      if (std::chrono::steady_clock::now() > until) return false;
      pollfd p{master_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[512];
      const ssize_t n = ::read(master_, buf, sizeof buf);
      if (n > 0) seen_.append(buf, size_t(n));
    }
    return true;
  }
  const std::string& seen() const { return seen_; }
  void hang_up() {
    ::close(master_);
    master_ = -1;
  }

 private:
  int master_ = -1, slave_ = -1;
  std::string name_, seen_;
};

TEST(ExecPrompt, TheAnswerTypedDecidesAndABadOneIsAskedAgain) {
  Pty pty;
  auto p = ExecPrompt::open(pty.name());
  ASSERT_TRUE(p) << p.error().describe();
  std::promise<PromptAnswer> got;
  (*p)->ask("9.1", "'/usr/bin/rm -rf /srv' (rm-recursive-force: ...), pid 4", true,
            [&](PromptAnswer a) { got.set_value(a); });
  ASSERT_TRUE(pty.shows("[d]eny: ")) << pty.seen();
  EXPECT_NE(pty.seen().find("run '/usr/bin/rm -rf /srv'"), std::string::npos) << pty.seen();
  pty.type("maybe\n");
  ASSERT_TRUE(pty.shows("please answer o, a or d")) << pty.seen();
  pty.type("always\n");
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), PromptAnswer::Always);
}

TEST(ExecPrompt, WithoutAlwaysOnlyOnceOrDenyAreTaken) {
  Pty pty;
  auto p = ExecPrompt::open(pty.name());
  ASSERT_TRUE(p) << p.error().describe();
  std::promise<PromptAnswer> got;
  (*p)->ask("9.2", "an exec whose words could not be read", false, [&](PromptAnswer a) { got.set_value(a); });
  ASSERT_TRUE(pty.shows("[o]nce, [d]eny: ")) << pty.seen();
  pty.type("a\r");  // a terminal in raw mode ends lines with CR
  ASSERT_TRUE(pty.shows("please answer o or d")) << pty.seen();
  pty.type("d\r");
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), PromptAnswer::Deny);
}

TEST(ExecPrompt, ADecisionElsewhereWithdrawsTheQuestionAndTheNextIsAsked) {
  Pty pty;
  auto p = ExecPrompt::open(pty.name());
  ASSERT_TRUE(p) << p.error().describe();
  std::atomic<int> first{0};
  std::promise<PromptAnswer> second;
  (*p)->ask("9.3", "'first'", true, [&](PromptAnswer) { first.fetch_add(1); });
  (*p)->ask("9.4", "'second'", true, [&](PromptAnswer a) { second.set_value(a); });
  ASSERT_TRUE(pty.shows("run 'first'?")) << pty.seen();
  (*p)->withdraw("9.3", "approved by faultctl approvals");
  ASSERT_TRUE(pty.shows("(approved by faultctl approvals)")) << pty.seen();
  ASSERT_TRUE(pty.shows("run 'second'?")) << pty.seen();
  pty.type("o\n");
  auto f = second.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), PromptAnswer::Once);
  EXPECT_EQ(first.load(), 0) << "a withdrawn question was answered";
}

TEST(ExecPrompt, AClosedTerminalLeavesTheHoldsToTheQueue) {
  Pty pty;
  auto p = ExecPrompt::open(pty.name());
  ASSERT_TRUE(p) << p.error().describe();
  std::atomic<int> answered{0};
  (*p)->ask("9.5", "'x'", true, [&](PromptAnswer) { answered.fetch_add(1); });
  ASSERT_TRUE(pty.shows("[d]eny: ")) << pty.seen();
  pty.hang_up();
  std::this_thread::sleep_for(200ms);
  (*p)->ask("9.6", "'y'", true, [&](PromptAnswer) { answered.fetch_add(1); });
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(answered.load(), 0);
  p->reset();  // ends, with questions left: nothing answered, nothing hangs
  EXPECT_EQ(answered.load(), 0);
}

TEST(ExecPrompt, NotATerminalIsNamed) {
  auto p = ExecPrompt::open("/dev/null");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().describe().find("/dev/null is not a terminal"), std::string::npos) << p.error().describe();
}

std::string prompt_args_error(const std::vector<std::string>& args) {
  auto r = parse_guard_args(args);
  if (r.ok()) return "";
  EXPECT_TRUE(r.error().bad_input) << r.error().message;
  return r.error().message;
}

TEST(ExecPromptArgs, TheFlagNeedsApproveDangerousAndAKnownValue) {
  auto r = parse_guard_args({"--enforce", "--approve-dangerous", "--approve-prompt", "off", "--", "true"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto* a = std::get_if<GuardArgs>(&*r);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->approve_prompt, GuardArgs::ApprovePrompt::Off);
  EXPECT_EQ(prompt_args_error({"--enforce", "--approve-prompt", "tty", "--", "true"}),
            "--approve-prompt asks about held execs: give --approve-dangerous");
  EXPECT_EQ(prompt_args_error({"--enforce", "--approve-dangerous", "--approve-prompt", "maybe", "--", "true"}),
            "--approve-prompt maybe: expected auto, tty or off");
}

}  // namespace
}  // namespace faultline
