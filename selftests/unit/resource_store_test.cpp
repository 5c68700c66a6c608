// The resource-fault state folder, write-ahead undo, revert, and the detached reaper.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/faults/resource/reaper.h"
#include "userspace/faults/resource/store.h"

namespace faultline {
namespace {

void sleep_ms(int ms) { ::usleep(static_cast<useconds_t>(ms) * 1000); }

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/faultline-store-unit-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::setenv("FAULTLINE_RUN_DIR", (root_ + "/run").c_str(), 1);
    auto s = ResourceFaultStore::open(true);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    store_.emplace(std::move(*s));
  }
  void TearDown() override {
    for (pid_t p : children_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    ::unsetenv("FAULTLINE_RUN_DIR");
    std::filesystem::remove_all(root_);
  }
  ResourceFaultState fresh(const std::string& id) {
    ResourceFaultState st;
    st.id = id;
    st.kind = "disk";
    st.summary = "unit";
    st.boot_id = boot_id();
    st.phase = "active";
    st.expires_ns = boottime_ns() + 60'000'000'000ULL;
    st.grace_ns = 1'000'000'000ULL;
    return st;
  }
  std::string touch(const std::string& name) {
    std::string p = root_ + "/" + name;
    std::ofstream(p) << "balloon";
    return p;
  }
  pid_t sleeper() {
    pid_t p = ::fork();
    if (p == 0) {
      for (;;) ::pause();
    }
    children_.push_back(p);
    return p;
  }
  std::string root_;
  std::optional<ResourceFaultStore> store_;
  std::vector<pid_t> children_;
};

TEST_F(StoreTest, IdsAreNeverReused) {
  auto a = store_->allocate_id(), b = store_->allocate_id();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, "r1");
  EXPECT_EQ(*b, "r2");
  ASSERT_TRUE(store_->write(fresh(*a)).ok());
  ASSERT_TRUE(store_->remove(*a).ok());
  EXPECT_EQ(*store_->allocate_id(), "r3") << "a removed fault's ID stays retired";
}

TEST_F(StoreTest, WriteReadList) {
  auto st = fresh("r7");
  st.undo.push_back(undo::unlink("/x", 1, 2));
  ASSERT_TRUE(store_->write(st).ok());
  ASSERT_TRUE(store_->write(fresh("r12")).ok());
  auto back = store_->read("r7");
  ASSERT_TRUE(back.ok()) << back.error().describe();
  EXPECT_EQ(back->undo.size(), 1u);
  EXPECT_EQ(back->undo[0]["op"], "unlink");
  auto all = store_->list();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "r7") << "listed by number, not by name";
  EXPECT_EQ(all[1].id, "r12");
  EXPECT_EQ(store_->read("r99").error().err, ENOENT);
}

TEST_F(StoreTest, RevertUndoesNewestFirstAndDropsTheState) {
  std::string balloon = touch("balloon");
  struct stat sb {};
  ASSERT_EQ(::stat(balloon.c_str(), &sb), 0);
  pid_t p = sleeper();
  ASSERT_EQ(::kill(p, SIGSTOP), 0);
  ASSERT_EQ(::waitpid(p, nullptr, WUNTRACED), p);
  auto info = read_process(p);
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(info->stopped());
  auto st = fresh("r1");
  st.undo.push_back(undo::resume(info->identity()));
  st.undo.push_back(undo::unlink(balloon, sb.st_dev, sb.st_ino));
  ASSERT_TRUE(store_->write(st).ok());

  auto r = revert_fault(*store_, "r1", "unit");
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_TRUE(*r);
  EXPECT_FALSE(std::filesystem::exists(balloon));
  for (int i = 0; i < 100 && read_process(p)->stopped(); ++i) sleep_ms(10);
  EXPECT_FALSE(read_process(p)->stopped()) << "the stopped process was resumed";
  EXPECT_EQ(store_->read("r1").error().err, ENOENT);
  auto again = revert_fault(*store_, "r1", "unit");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "a second revert finds nothing to do";
  EXPECT_FALSE(std::filesystem::exists(store_->faults_dir() + "/r1.lock")) << "the lock file goes with the state";
}

TEST_F(StoreTest, UndoNeverTouchesAReusedPidOrAReplacedFile) {
  pid_t p = sleeper();
  auto info = read_process(p);
  ASSERT_TRUE(info.ok());
  ProcessIdentity wrong = info->identity();
  wrong.start += 1;  // same PID, another process
  ASSERT_TRUE(undo_action(undo::kill(wrong)).ok());
  EXPECT_TRUE(is_alive(info->identity())) << "a PID whose start time differs is not ours";

  std::string f = touch("other");
  struct stat sb {};
  ASSERT_EQ(::stat(f.c_str(), &sb), 0);
  ASSERT_TRUE(undo_action(undo::unlink(f, sb.st_dev, sb.st_ino + 1)).ok());
  EXPECT_TRUE(std::filesystem::exists(f)) << "a file with another inode is not our balloon";
  ASSERT_TRUE(undo_action(undo::kill(info->identity())).ok());
  EXPECT_FALSE(is_alive(info->identity()));
}

TEST_F(StoreTest, NamesCarryARandomToken) {
  auto a = fresh("r1"), b = fresh("r1");  // r1 in two state folders
  a.token = random_token();
  b.token = random_token();
  EXPECT_EQ(a.token.size(), 12u);
  EXPECT_NE(a.unique_name(), b.unique_name());
  EXPECT_EQ(a.unique_name().rfind("r1-", 0), 0u);
  ASSERT_TRUE(store_->write(a).ok());
  EXPECT_EQ(store_->read("r1")->token, a.token) << "the token survives the state file";
}

TEST_F(StoreTest, FailedRevertKeepsTheStateForARetry) {
  auto st = fresh("r1");
  st.undo.push_back({{"op", "no-such-op"}});
  ASSERT_TRUE(store_->write(st).ok());
  auto r = revert_fault(*store_, "r1", "unit");
  EXPECT_FALSE(r.ok());
  auto back = store_->read("r1");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->phase, "revert-failed");
  EXPECT_NE(back->error.find("no-such-op"), std::string::npos) << back->error;
}

TEST_F(StoreTest, RefusesAFolderOthersCanWrite) {
  ASSERT_EQ(::chmod((root_ + "/run").c_str(), 0777), 0);
  auto s = ResourceFaultStore::open(false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().err, EPERM);
  EXPECT_NE(s.error().message.find("others can write"), std::string::npos) << s.error().message;
}

TEST_F(StoreTest, GraceComesFromTheEnvironmentWithinBounds) {
  ::setenv("FAULTLINE_REAPER_GRACE", "2s", 1);
  EXPECT_EQ(reaper_grace_ns(), 2'000'000'000ULL);
  ::setenv("FAULTLINE_REAPER_GRACE", "10ms", 1);
  EXPECT_EQ(reaper_grace_ns(), 5'000'000'000ULL) << "below 1s is ignored";
  ::unsetenv("FAULTLINE_REAPER_GRACE");
  EXPECT_EQ(reaper_grace_ns(), 5'000'000'000ULL);
}

// The reaper is in its own session, not our child, and reverts at expiry + grace.
TEST_F(StoreTest, ReaperIsDetachedAndRevertsWhenDue) {
  std::string balloon = touch("balloon");
  auto st = fresh("r1");
  st.owner = read_process(::getpid())->identity();
  st.undo.push_back(undo::unlink(balloon, 0, 0));
  st.expires_ns = boottime_ns() + 500'000'000ULL;
  st.grace_ns = 1'000'000'000ULL;
  ASSERT_TRUE(store_->write(st).ok());
  const uint64_t due = st.expires_ns + st.grace_ns;

  auto reaper = spawn_reaper(*store_, "r1");
  ASSERT_TRUE(reaper.ok()) << reaper.error().describe();
  auto info = read_process(reaper->pid);
  ASSERT_TRUE(info.ok());
  EXPECT_NE(info->ppid, ::getpid()) << "the reaper must not be our child";
  EXPECT_NE(::getsid(reaper->pid), ::getsid(0)) << "the reaper has a session of its own";
  EXPECT_NE(::getpgid(reaper->pid), ::getpgid(0)) << "and a process group that is not ours";
  EXPECT_NE(::getsid(reaper->pid), reaper->pid) << "not a session leader, so it can never get a controlling terminal";
  EXPECT_EQ(info->comm, "fl-reaper-r1");

  while (boottime_ns() < due - 200'000'000ULL) {
    ASSERT_TRUE(std::filesystem::exists(balloon)) << "reverted before expiry + grace while the owner lives";
    sleep_ms(50);
  }
  for (int i = 0; i < 100 && std::filesystem::exists(balloon); ++i) sleep_ms(20);
  EXPECT_FALSE(std::filesystem::exists(balloon)) << "not reverted within 2s of expiry + grace";
  EXPECT_EQ(store_->read("r1").error().err, ENOENT);
  for (int i = 0; i < 100 && is_alive(*reaper); ++i) sleep_ms(20);
  EXPECT_FALSE(is_alive(*reaper)) << "the reaper exits once its fault is reverted";
}

TEST_F(StoreTest, SweepRevertsOverdueFaultsWithoutAReaper) {
  std::string balloon = touch("balloon");
  auto st = fresh("r1");
  st.undo.push_back(undo::unlink(balloon, 0, 0));
  st.expires_ns = boottime_ns() - 1;  // due, owner gone (pid 0), no reaper
  ASSERT_TRUE(store_->write(st).ok());
  auto notes = sweep_resource_faults(*store_);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("reverted fault r1"), std::string::npos) << notes[0];
  EXPECT_FALSE(std::filesystem::exists(balloon));

  auto later = fresh("r2");
  later.boot_id = "another-boot";
  std::string b2 = touch("b2");
  later.undo.push_back(undo::unlink(b2, 0, 0));
  ASSERT_TRUE(store_->write(later).ok());
  notes = sweep_resource_faults(*store_);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("reboot"), std::string::npos) << notes[0];
  EXPECT_FALSE(std::filesystem::exists(b2));
}

}  // namespace
}  // namespace faultline
