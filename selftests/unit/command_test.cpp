// The faultctl command skeleton: a parse error is bad input, --help is an answer,
// and only a parse that ends in arguments reaches the command's body.
#include "ctl/command.h"

#include <gtest/gtest.h>

#include <variant>

namespace faultline {
namespace {

TEST(Switches, KnownSwitchesAreGivenAndAnythingElseIsBadInput) {
  auto r = parse_switches({"--json"}, {"--json"}, "usage\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(std::holds_alternative<Switches>(*r));
  EXPECT_TRUE(std::get<Switches>(*r).has("--json"));
  EXPECT_FALSE(std::get<Switches>(*r).has("--all"));

  auto bad = parse_switches({"--json", "--bogus"}, {"--json"}, "usage\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().bad_input);
  EXPECT_EQ(bad.error().message, "unknown argument '--bogus'");
}

TEST(Switches, HelpIsTheHelpText) {
  for (const char* h : {"-h", "--help"}) {
    auto r = parse_switches({h}, {}, "usage: faultctl uninstall\n");
    ASSERT_TRUE(r.ok()) << h << ": " << r.error().message;
    ASSERT_TRUE(std::holds_alternative<HelpText>(*r)) << h;
    EXPECT_EQ(std::get<HelpText>(*r).text, "usage: faultctl uninstall\n");
  }
}

TEST(RunCommand, OnlyArgumentsReachTheBody) {
  int calls = 0;
  auto body = [&](Switches& s) {
    ++calls;
    return s.has("--json") ? 5 : 6;
  };
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_command("faultctl test", Result<Parsed<Switches>>(input_error(EINVAL, "--x: bad")), kRootNever, body),
            kExitBadInput);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "faultctl test: --x: bad\n");

  testing::internal::CaptureStdout();
  EXPECT_EQ(
      run_command("faultctl test", Result<Parsed<Switches>>(Parsed<Switches>(HelpText{"usage\n"})), kRootNever, body),
      kExitCompleted);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "usage\n");
  EXPECT_EQ(calls, 0) << "neither an error nor --help runs the command";

  EXPECT_EQ(run_command("faultctl test", parse_switches({"--json"}, {"--json"}, ""), kRootNever, body), 5);
  EXPECT_EQ(calls, 1);
}

TEST(RunCommand, ADryRunNeedsNoRoot) {
  struct Flags {
    bool dry_run = false;
  };
  struct Args {
    Flags flags;
  };
  constexpr RootNeed unless{RootNeed::When::UnlessDryRun, "needs root"};
  EXPECT_FALSE(root_needed(unless, Args{Flags{true}}));
  EXPECT_TRUE(root_needed(unless, Args{Flags{false}}));
  EXPECT_FALSE(root_needed(kRootNever, Args{}));
  EXPECT_TRUE(root_needed(RootNeed{RootNeed::When::Always, "needs root"}, Args{Flags{true}}));
}

}  // namespace
}  // namespace faultline
