// faultctl ca: the parser's refusals, its EXAMPLES, and the real binary through
// a CA's life (init, show, export, rotate) in a private folder, cross-checked
// with the openssl command line.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "base/files.h"
#include "ctl/ca_args.h"
#include "selftests/lib/child_process.h"
#include "selftests/tls/tls_harness.h"

namespace {

using namespace std::chrono_literals;

std::vector<std::string> words_of(std::string_view line) {
  std::vector<std::string> out;
  std::string w;
  for (char c : line) {
    if (c == ' ') {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

TEST(CaArgs, RefusalsNameTheFlagOrAction) {
  struct Case {
    std::vector<std::string> words;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{}, "missing the action: faultctl ca init|show|export|rotate"},
      {{"renew"}, "unknown action 'renew' (init, show, export, rotate)"},
      {{"show", "extra"}, "unexpected argument 'extra'"},
      {{"show", "--out", "x.pem"}, "--out is an option of export"},
      {{"init", "--with-previous"}, "--with-previous is an option of export"},
      {{"export", "--json"}, "--json is an option of show"},
      {{"init", "--dir"}, "--dir needs a value"},
      {{"init", "--dir="}, "--dir: an empty path"},
      {{"init", "--force"}, "unknown flag '--force'"},
      {{"show", "--json=yes"}, "--json takes no value"},
  };
  for (const auto& c : cases) {
    auto r = faultline::parse_ca_args(c.words);
    ASSERT_FALSE(r.ok()) << ::testing::PrintToString(c.words);
    EXPECT_EQ(r.error().message, c.error);
    EXPECT_TRUE(r.error().bad_input);
  }
  auto ok = faultline::parse_ca_args({"export", "--dir=/tmp/x", "--out", "/tmp/y.pem", "--with-previous"});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  const auto& a = std::get<faultline::CaArgs>(*ok);
  EXPECT_EQ(a.dir, "/tmp/x");
  EXPECT_EQ(a.out, "/tmp/y.pem");
  EXPECT_TRUE(a.with_previous);
}

TEST(CaArgs, HelpExamplesParseAndFit) {
  auto r = faultline::parse_ca_args({"--help"});
  ASSERT_TRUE(r.ok());
  const std::string help = std::get<faultline::HelpText>(*r).text;
  const auto at = help.find("\nEXAMPLES:\n");
  ASSERT_NE(at, std::string::npos);
  int commands = 0;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  std::istringstream examples(help.substr(at + 11));
  for (std::string line; std::getline(examples, line);) {
    auto words = words_of(line);
    if (words.empty() || words[0].starts_with("#")) continue;
    ASSERT_GE(words.size(), 2u);
    ASSERT_EQ(words[0], "faultctl");
    ASSERT_EQ(words[1], "ca");
    auto parsed = faultline::parse_ca_args(std::vector<std::string>(words.begin() + 2, words.end()));
    EXPECT_TRUE(parsed.ok()) << line << ": " << (parsed.ok() ? "" : parsed.error().message);
    ++commands;
  }
  EXPECT_GE(commands, 3);
}

class CaCommand : public ::testing::Test {
 protected:
  fltest::CommandResult faultctl(std::vector<std::string> args, std::vector<std::string> env = {}) {
    args.insert(args.begin(), FAULTCTL_PATH);
    return fltest::run_command(args, {.env = env}, 30s);
  }
  std::string ca_dir() const { return dir_.file("ca"); }
  static unsigned mode_of(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  fltest::TempDir dir_;
};

TEST_F(CaCommand, LifeCycle) {
  auto none = faultctl({"ca", "show", "--dir", ca_dir()});
  EXPECT_TRUE(none.status.is(1)) << none.describe();
  EXPECT_NE(none.err.find("no CA in " + ca_dir() + " (faultctl ca init creates one)"), std::string::npos)
      << none.describe();

  auto no_rotate = faultctl({"ca", "rotate", "--dir", ca_dir()});
  EXPECT_TRUE(no_rotate.status.is(1)) << no_rotate.describe();
  EXPECT_EQ(no_rotate.err, "faultctl ca rotate: no CA in " + ca_dir() + " (faultctl ca init creates one)\n");

  auto init = faultctl({"ca", "init", "--dir", ca_dir()});
  ASSERT_TRUE(init.status.is(0)) << init.describe();
  EXPECT_NE(init.out.find("created the local CA in " + ca_dir()), std::string::npos) << init.out;
  EXPECT_EQ(mode_of(ca_dir()), 0700u);
  EXPECT_EQ(mode_of(ca_dir() + "/ca.key"), 0600u);

  // FAULTLINE_CA_DIR names the same folder; init again keeps the CA.
  auto again = faultctl({"ca", "init"}, {"FAULTLINE_CA_DIR=" + ca_dir()});
  ASSERT_TRUE(again.status.is(0)) << again.describe();
  EXPECT_NE(again.out.find("already exists"), std::string::npos) << again.out;

  auto shown = faultctl({"ca", "show", "--dir", ca_dir(), "--json"});
  ASSERT_TRUE(shown.status.is(0)) << shown.describe();
  const auto j = nlohmann::json::parse(shown.out);
  const std::string fp = j["ca"]["sha256_fingerprint"];
  EXPECT_EQ(j["ca"]["key_type"], "EC P-256");
  EXPECT_FALSE(j.contains("previous"));

  // export --out: the certificate, readable by all, and openssl agrees on the fingerprint.
  const std::string out = dir_.file("exported.pem");
  auto exported = faultctl({"ca", "export", "--dir", ca_dir(), "--out", out});
  ASSERT_TRUE(exported.status.is(0)) << exported.describe();
  EXPECT_EQ(mode_of(out), 0644u);
  auto openssl = fltest::run_command({"openssl", "x509", "-in", out, "-noout", "-fingerprint", "-sha256"});
  ASSERT_TRUE(openssl.status.is(0)) << openssl.describe();
  EXPECT_NE(openssl.out.find(fp), std::string::npos) << openssl.out << " vs " << fp;
  auto to_stdout = faultctl({"ca", "export", "--dir", ca_dir()});
  ASSERT_TRUE(to_stdout.status.is(0));
  EXPECT_EQ(to_stdout.out, *faultline::read_text_file(out));

  auto rotated = faultctl({"ca", "rotate", "--dir", ca_dir()});
  ASSERT_TRUE(rotated.status.is(0)) << rotated.describe();
  auto after = nlohmann::json::parse(faultctl({"ca", "show", "--dir", ca_dir(), "--json"}).out);
  EXPECT_NE(after["ca"]["sha256_fingerprint"], fp);
  EXPECT_EQ(after["previous"]["sha256_fingerprint"], fp);
  auto both = faultctl({"ca", "export", "--dir", ca_dir(), "--with-previous"});
  ASSERT_TRUE(both.status.is(0));
  size_t certs = 0;
  for (size_t at = both.out.find("BEGIN CERTIFICATE"); at != std::string::npos;
       at = both.out.find("BEGIN CERTIFICATE", at + 1))
    ++certs;
  EXPECT_EQ(certs, 2u);
}

TEST_F(CaCommand, KeyOthersCanReadIsRefused) {
  ASSERT_TRUE(faultctl({"ca", "init", "--dir", ca_dir()}).status.is(0));
  ASSERT_EQ(::chmod((ca_dir() + "/ca.key").c_str(), 0640), 0);
  auto r = faultctl({"ca", "show", "--dir", ca_dir()});
  EXPECT_TRUE(r.status.is(1)) << r.describe();
  EXPECT_NE(r.err.find("mode 0640 lets others read it"), std::string::npos) << r.describe();
}

TEST_F(CaCommand, BadWordsExitTwoAndHelpListsCa) {
  auto r = faultctl({"ca", "export", "--json"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_EQ(r.err, "faultctl ca: --json is an option of show\n");
  auto help = faultctl({"--help"});
  EXPECT_NE(help.out.find("  ca "), std::string::npos) << help.out;
}

}  // namespace
