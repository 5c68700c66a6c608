// The faultctl command skeleton: a parse error is bad input, --help is an answer,
// and only a parse that ends in arguments reaches the command's body.
#include "ctl/command.h"

#include <gtest/gtest.h>

#include <variant>

#include "ctl/global_flags.h"

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

// faultctl [--control-plane URL] [--token TOKEN] COMMAND: the flags before the
// command are taken off; the environment stands in for a flag not given.
const char* no_env(const char*) { return nullptr; }

TEST(GlobalFlags, BothFormsAreTakenOffAndTheCommandStays) {
  std::vector<std::string> args = {
      "--control-plane", "http://127.0.0.1:7070", "--token=fl_api_x", "run", "--token", "t"};
  auto r = take_global_flags(args, no_env);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->cp_url, "http://127.0.0.1:7070");
  EXPECT_EQ(r->cp_token, "fl_api_x");
  EXPECT_TRUE(r->cp_flag_given);
  EXPECT_EQ(args, (std::vector<std::string>{"run", "--token", "t"})) << "a command's own flags are not global";
}

TEST(GlobalFlags, TheEnvironmentStandsInAndAFlagWins) {
  auto env = [](const char* name) -> const char* {
    const std::string n = name;
    return n == "FAULTLINE_CP" ? "http://from-env:1" : n == "FAULTLINE_CP_TOKEN" ? "env-token" : nullptr;
  };
  std::vector<std::string> args = {"list"};
  auto from_env = take_global_flags(args, env);
  ASSERT_TRUE(from_env.ok());
  EXPECT_EQ(from_env->cp_url, "http://from-env:1");
  EXPECT_EQ(from_env->cp_token, "env-token");
  EXPECT_FALSE(from_env->cp_flag_given) << "FAULTLINE_CP alone is not the flag";

  args = {"--token", "flag-token", "list"};
  auto flag = take_global_flags(args, env);
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->cp_token, "flag-token");
  EXPECT_EQ(flag->cp_url, "http://from-env:1");
  EXPECT_EQ(args, std::vector<std::string>{"list"});
}

TEST(GlobalFlags, AMissingOrEmptyValueIsBadInputAndNothingIsTaken) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--control-plane"}, "--control-plane"},
      {{"--token"}, "--token"},
      {{"--token="}, "--token"},
      {{"--control-plane", ""}, "--control-plane"},
      {{"--token", "x", "--control-plane"}, "--control-plane"},
  };
  for (const auto& [words, flag] : cases) {
    std::vector<std::string> args = words;
    auto r = take_global_flags(args, no_env);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_TRUE(r.error().bad_input);
    EXPECT_EQ(r.error().message.rfind(flag, 0), 0u) << r.error().message;
    EXPECT_EQ(args, words) << "args are left as they were";
  }
}

TEST(GlobalFlags, ALookAlikeIsNotAGlobalFlag) {
  std::vector<std::string> args = {"--tokens", "x", "run"};
  auto r = take_global_flags(args, no_env);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cp_token.empty());
  EXPECT_EQ(args.front(), "--tokens") << "left for the command parser to refuse";
}

}  // namespace
}  // namespace faultline
