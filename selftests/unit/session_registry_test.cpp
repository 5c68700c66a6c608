// The registry of process-held faults and guards: IDs, records, and what
// happens to a record whose owner is gone or that someone tampered with.
#include "userspace/state/session_registry.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace faultline {
namespace {

class SessionRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-sessions-unit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::setenv("FAULTLINE_RUN_DIR", (root_ + "/run").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("FAULTLINE_RUN_DIR");
    std::filesystem::remove_all(root_);
  }
  std::string root_;
};

TEST(SessionId, OnlySAndGFollowedByDigits) {
  EXPECT_TRUE(is_session_id("s1"));
  EXPECT_TRUE(is_session_id("g42"));
  for (const char* bad : {"", "s", "g", "r1", "1", "s1x", "s-1", "s1/../x", "g12345678901234"})
    EXPECT_FALSE(is_session_id(bad)) << bad;
}

TEST_F(SessionRegistryTest, OwnerRegistersAndRemovesItsRecord) {
  Session s;
  s.kind = "syscall";
  s.mechanism = "seccomp";
  s.summary = "EIO on openat";
  s.expires_ns = 123;
  std::string id, path;
  {
    auto owner = SessionOwner::start(s);
    ASSERT_TRUE(owner.ok()) << owner.error().describe();
    id = owner->id();
    EXPECT_EQ(id, "s1");
    auto reg = SessionRegistry::open(false);
    ASSERT_TRUE(reg.ok());
    path = reg->path(id);
    auto list = reg->list();
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0].owner.pid, ::getpid());
    EXPECT_EQ(list[0].summary, "EIO on openat");
    EXPECT_EQ(list[0].expires_ns, 123u);
    EXPECT_FALSE(owner->abort_requested());
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the owner left its record";
  // IDs are never reused, and guards count on their own.
  s.kind = "guard";
  auto g = SessionOwner::start(s);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->id(), "g1");
  s.kind = "syscall";
  g->end();
  auto again = SessionOwner::start(s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), "s2");
}

TEST_F(SessionRegistryTest, RecordOfADeadOwnerIsDropped) {
  auto reg = SessionRegistry::open(true);
  ASSERT_TRUE(reg.ok());
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  auto info = read_process(child);
  ASSERT_TRUE(info.ok());
  ProcessIdentity dead = info->identity();
  ::waitpid(child, nullptr, 0);
  Session s;
  s.id = "s7";
  s.kind = "syscall";
  s.owner = dead;
  s.boot_id = boot_id();
  ASSERT_TRUE(reg->write(s).ok());
  EXPECT_TRUE(reg->list().empty());
  EXPECT_FALSE(std::filesystem::exists(reg->path("s7")));
  // abort of it: nothing was running, nothing to signal.
  ASSERT_TRUE(reg->write(s).ok());
  auto a = abort_session(*reg, "s7");
  ASSERT_TRUE(a.ok()) << a.error().describe();
  EXPECT_FALSE(a->was_running);
  EXPECT_FALSE(std::filesystem::exists(reg->path("s7")));
}

TEST_F(SessionRegistryTest, AbortRefusesAMapThatIsNotAFaultlinePolicy) {
  auto reg = SessionRegistry::open(true);
  ASSERT_TRUE(reg.ok());
  Session s;
  s.id = "s3";
  s.kind = "syscall";
  s.owner = read_process(::getpid())->identity();
  s.boot_id = boot_id();
  s.policy_map_id = 0x7fffffff;  // no such map
  ASSERT_TRUE(reg->write(s).ok());
  auto a = abort_session(*reg, "s3");
  EXPECT_FALSE(a.ok());
  EXPECT_TRUE(std::filesystem::exists(reg->path("s3"))) << "a failed abort dropped the record";
  ASSERT_TRUE(reg->remove("s3").ok());
}

TEST_F(SessionRegistryTest, BadRecordsAreRefusedNotTrusted) {
  for (const char* text : {"[]", "{}", R"({"id":"s1"})", R"({"id":"../x","owner":{}})", R"({"id":5,"owner":{}})"}) {
    auto j = nlohmann::json::parse(text);
    EXPECT_FALSE(Session::from_json(j).ok()) << text;
  }
  auto reg = SessionRegistry::open(true);
  ASSERT_TRUE(reg.ok());
  std::ofstream(reg->path("s9")) << "not json";
  EXPECT_TRUE(reg->list().empty());
  EXPECT_FALSE(reg->read("s9").ok());
}

TEST_F(SessionRegistryTest, GuardPinsAreRemovedOnlyFromBpffs) {
  const std::string dir = root_ + "/g1";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  std::ofstream(dir + "/fl_connect4") << "not a pin";
  auto st = remove_guard_pins(dir);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().describe().find("not on a bpf filesystem"), std::string::npos) << st.error().describe();
  EXPECT_TRUE(std::filesystem::exists(dir + "/fl_connect4"));
  EXPECT_TRUE(remove_guard_pins(root_ + "/missing").ok()) << "a folder already gone is fine";
}

}  // namespace
}  // namespace faultline
