// faultctl guard's DLP and content-policy flags: what they set, and each bad
// one refused with one line naming it (exit 2, nothing run).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "ctl/guard_args.h"

namespace faultline {
namespace {

std::string dlp_args_error(const std::vector<std::string>& args) {
  auto r = parse_guard_args(args);
  if (r.ok()) return "";
  EXPECT_TRUE(r.error().bad_input) << r.error().message;
  return r.error().message;
}

std::string content_file(const std::string& text) {
  const std::string path = "/tmp/fl-dlp-args-" + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << text;
  return path;
}

TEST(GuardDlpArgs, FlagsSetTheEngineActionAndHosts) {
  auto r = parse_guard_args({"--dlp", "--dlp-action", "redact", "--dlp-host", "*.example.com", "--", "true"});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto* a = std::get_if<GuardArgs>(&*r);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->requests);
  EXPECT_TRUE(a->capture.dlp.dlp);
  EXPECT_NE(a->capture.dlp.engine, nullptr);
  EXPECT_EQ(a->capture.dlp.action, DlpAction::redact);
  ASSERT_EQ(a->capture.dlp.hosts.size(), 1u);
  EXPECT_TRUE(a->capture.dlp.hosts[0].matches("api.example.com", 443));
}

TEST(GuardDlpArgs, BadFlagsAreRefusedNamingThem) {
  EXPECT_EQ(dlp_args_error({"--dlp", "--dlp-action", "block", "--", "true"}),
            "--dlp-action 'block': deny, redact or monitor");
  EXPECT_EQ(dlp_args_error({"--dlp-host", "a.example.com", "--", "true"}), "--dlp-host applies to --dlp");
  EXPECT_EQ(dlp_args_error({"--content-policy-action", "deny", "--", "true"}),
            "--content-policy-action applies to --content-policy");
  const std::string file = content_file("ok: fine\n\nbad: re:(unclosed\n");
  const std::string err = dlp_args_error({"--content-policy", file, "--", "true"});
  EXPECT_EQ(err.rfind("--content-policy " + file + ":3: label 'bad': ", 0), 0u) << err;
  const std::string no_colon = content_file("# comment\njust words\n");
  EXPECT_EQ(dlp_args_error({"--content-policy", no_colon, "--", "true"}),
            "--content-policy " + no_colon + ":2: expected 'label: literal' or 'label: re:REGEX'");
  const std::string action = content_file("a: b\n");
  EXPECT_EQ(dlp_args_error({"--content-policy", action, "--content-policy-action", "redact", "--", "true"}),
            "--content-policy-action 'redact': deny, approve or monitor");
  ::unlink(no_colon.c_str());
}

TEST(GuardDlpArgs, ADlpTypeRuleNeedsDlpAndTerminatedTls) {
  const std::string policy = "/tmp/fl-dlp-args-policy-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(policy) << "rules:\n  - {name: no-aws, action: deny, dlp_type: aws_access_key}\n";
  EXPECT_EQ(dlp_args_error({"--policy", policy, "--terminate-tls", "--", "true"}),
            "rule no-aws matches dlp_type aws_access_key: it needs --dlp");
  const std::string err = dlp_args_error({"--policy", policy, "--dlp", "--", "true"});
  EXPECT_NE(err.find("rule no-aws: matches on a DLP finding"), std::string::npos) << err;
  EXPECT_TRUE(parse_guard_args({"--policy", policy, "--dlp", "--terminate-tls", "--", "true"}).ok());
  ::unlink(policy.c_str());
}

}  // namespace
}  // namespace faultline
