// --path of faultctl run syscall: the flag's checks, the table of path
// arguments, lexical normalization and component-boundary matching.
#include <gtest/gtest.h>

#include "ctl/syscall_args.h"
#include "parse_words.h"
#include "userspace/faults/syscall/path_args.h"

namespace faultline {
namespace {

TEST(SyscallPath, NormalizesLexically) {
  EXPECT_EQ(normalize_path("/tmp/fl-target/"), "/tmp/fl-target");
  EXPECT_EQ(normalize_path("//tmp/./a//b/"), "/tmp/a/b");
  EXPECT_EQ(normalize_path("/tmp/a/../b"), "/tmp/b");
  EXPECT_EQ(normalize_path("/../.."), "/");
  EXPECT_EQ(normalize_path("/"), "/");
  EXPECT_EQ(resolve_path("/srv/app", "data/../f"), "/srv/app/f");
  EXPECT_EQ(resolve_path("/srv/app", "../x"), "/srv/x");
  EXPECT_EQ(resolve_path("/srv/app", "/etc/x"), "/etc/x");
  EXPECT_EQ(resolve_path("/srv/app", ""), "/srv/app") << "AT_EMPTY_PATH names the dirfd itself";
}

TEST(SyscallPath, MatchesWholeComponents) {
  EXPECT_TRUE(under_prefix("/tmp/t/f", "/tmp/t"));
  EXPECT_TRUE(under_prefix("/tmp/t", "/tmp/t")) << "the folder itself is under its prefix";
  EXPECT_FALSE(under_prefix("/tmp/ty/f", "/tmp/t"));
  EXPECT_FALSE(under_prefix("/tmp", "/tmp/t"));
  EXPECT_TRUE(under_prefix("/anything", "/"));
}

TEST(SyscallPath, KnowsWhichArgumentIsThePath) {
  ASSERT_EQ(path_args_of("open").size(), 1u);
  EXPECT_EQ(path_args_of("open")[0].path, 0);
  EXPECT_EQ(path_args_of("open")[0].dirfd, -1);
  ASSERT_EQ(path_args_of("openat").size(), 1u);
  EXPECT_EQ(path_args_of("openat")[0].path, 1);
  EXPECT_EQ(path_args_of("openat")[0].dirfd, 0);
  ASSERT_EQ(path_args_of("renameat2").size(), 2u);
  EXPECT_EQ(path_args_of("renameat2")[1].path, 3);
  EXPECT_EQ(path_args_of("renameat2")[1].dirfd, 2);
  EXPECT_EQ(path_args_of("symlink")[0].path, 1) << "symlink's first argument is content, not a lookup";
  EXPECT_TRUE(path_args_of("read").empty());
  EXPECT_TRUE(path_args_of("connect").empty());
}

TEST(SyscallPath, FlagIsNormalizedAndRepeatable) {
  auto r = args_of(parse_syscall_args(
      split("--syscall openat,unlinkat --errno EIO --duration 5s --path /tmp/a/ --path //srv/./b -- true")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec.paths, (std::vector<std::string>{"/tmp/a", "/srv/b"}));
  EXPECT_NE(r->spec.describe().find("under /tmp/a or /srv/b"), std::string::npos) << r->spec.describe();
}

TEST(SyscallPath, RefusesWhatCannotMatch) {
  struct Case {
    const char* line;
    const char* names;
  };
  for (const Case& c : {
           Case{"--syscall openat --errno EIO --duration 5s --path rel/dir -- true", "--path rel/dir: not absolute"},
           Case{"--syscall connect --errno EIO --duration 5s --path /tmp -- true", "--syscall connect"},
           Case{"--syscall openat,fsync --errno EIO --duration 5s --path /tmp -- true", "--syscall fsync"},
       }) {
    auto r = args_of(parse_syscall_args(split(c.line)));
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.error().message.find(c.names), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace faultline
