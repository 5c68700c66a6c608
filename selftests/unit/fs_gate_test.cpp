// The file gate's rules (`faultctl guard --enforce-fs`) without a kernel:
// the order deny, allow, default; what --fs-deny-exec records of a program.
#include "userspace/guard/fs_gate.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

using faultline::denied_executable;
using faultline::fs_rule_for;
using faultline::FsGateOptions;
namespace fs = std::filesystem;

TEST(FsGateRules, DenyThenAllowThenTheDefault) {
  FsGateOptions o;
  o.deny = {".ssh/", "secret"};
  EXPECT_EQ(fs_rule_for(o, "/root/.ssh/id_ed25519"), "--fs-deny .ssh/");
  EXPECT_EQ(fs_rule_for(o, "/srv/secrets.txt"), "--fs-deny secret");
  EXPECT_EQ(fs_rule_for(o, "/usr/lib/libc.so.6"), "");  // no default deny: allowed
  o.default_deny = true;
  o.allow = {"/usr/", "/srv/"};
  EXPECT_EQ(fs_rule_for(o, "/usr/lib/libc.so.6"), "");
  EXPECT_EQ(fs_rule_for(o, "/srv/secrets.txt"), "--fs-deny secret");  // a deny wins over an allow
  EXPECT_EQ(fs_rule_for(o, "/etc/passwd"), "default");
}

TEST(FsGateRules, ADeniedProgramIsResolvedAndHashed) {
  char tmpl[] = "/tmp/fl-fs-gate-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  std::ofstream(dir + "/prog") << "abc";
  fs::create_symlink(dir + "/prog", dir + "/link");
  auto d = denied_executable(dir + "/link");
  ASSERT_TRUE(d.ok()) << d.error().describe();
  EXPECT_EQ(d->given, dir + "/link");
  EXPECT_EQ(d->path, dir + "/prog");
  EXPECT_EQ(d->size, 3u);
  // SHA-256 of "abc" (FIPS 180-2's example).
  EXPECT_EQ(d->sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/prog").c_str(), &st), 0);
  EXPECT_EQ(d->ino, st.st_ino);
  EXPECT_FALSE(denied_executable(dir + "/missing").ok());
  auto folder = denied_executable(dir);
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.error().describe().find("not a regular file"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
