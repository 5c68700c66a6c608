// NetfaultMaps::keep_open (faultd): the pinned maps opened once and their fds
// reused, and opened anew as soon as a pin is removed, replaced or added, or
// the state is torn down and made again; never a map that is no longer pinned.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "base/unique_fd.h"
#include "faultline/abi.h"
#include "loader/bpffs.h"
#include "loader/netfault_maps.h"
#include "selftests/lib/require_root.h"

namespace faultline::bpftest {
namespace {

uint32_t kept_map_id(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

uint32_t kept_pin_id(const std::string& path) {
  UniqueFd fd(bpf_obj_get(path.c_str()));
  return fd ? kept_map_id(fd.get()) : 0;
}

class KeptMapsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("pinning maps under /sys/fs/bpf");
    layout_.root = "/sys/fs/bpf/fltest-kept-" + std::to_string(::getpid());
    NetfaultMaps::keep_open(true);
    kept_ = true;
  }

  void TearDown() override {
    if (!kept_) return;
    NetfaultMaps::keep_open(false);
    unpin_all();
    remove_layout_locks(layout_);
    struct stat st {};
    EXPECT_NE(::stat(layout_.root.c_str(), &st), 0) << "left behind: " << layout_.root;
  }

  void unpin_all() const {
    for (const auto& name : NetfaultMaps::names()) ::unlink(layout_.map(name).c_str());
    remove_bpffs_dirs(layout_);
  }

  // Every map of `m` is the one pinned under its name right now.
  void expect_pinned(const NetfaultMaps& m) const {
    EXPECT_EQ(kept_map_id(m.control()), kept_pin_id(layout_.map("fl_control")));
    EXPECT_EQ(kept_map_id(m.exact_bloom()), kept_pin_id(layout_.map("fl_exact_bloom")));
    EXPECT_EQ(kept_map_id(m.attach()), kept_pin_id(layout_.map("fl_attach")));
    EXPECT_EQ(kept_map_id(m.prefix_bloom()), kept_pin_id(layout_.map("fl_prefix_bloom")));
  }

  BpffsLayout layout_;
  bool kept_ = false;
};

TEST_F(KeptMapsTest, ReusesTheFdsWhileThePinsStay) {
  auto first = NetfaultMaps::open(layout_, true);
  ASSERT_TRUE(first.ok()) << first.error().describe();
  EXPECT_TRUE(first->created()) << "nothing was pinned: the maps are made";
  auto second = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(second.ok()) << second.error().describe();
  EXPECT_FALSE(second->created());
  auto third = NetfaultMaps::open(layout_, true);
  ASSERT_TRUE(third.ok()) << third.error().describe();
  EXPECT_FALSE(third->created()) << "kept maps were not made by this open";
  EXPECT_EQ(second->control(), third->control()) << "the second and third open share the kept fds";
  EXPECT_EQ(second->rng(), third->rng());
  expect_pinned(*third);
}

TEST_F(KeptMapsTest, OpensAgainWhenAPinIsReplaced) {
  auto a = NetfaultMaps::open(layout_, true);
  ASSERT_TRUE(a.ok()) << a.error().describe();
  auto kept = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(kept.ok());
  const uint32_t old_id = kept_map_id(kept->control());
  // Another map of the same shape pinned in fl_control's place.
  UniqueFd other(bpf_map_create(BPF_MAP_TYPE_ARRAY, "fl_control", sizeof(uint32_t), sizeof(fl_control), 1, nullptr));
  ASSERT_TRUE(other.valid()) << std::strerror(errno);
  ASSERT_EQ(::unlink(layout_.map("fl_control").c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(bpf_obj_pin(other.get(), layout_.map("fl_control").c_str()), 0) << std::strerror(errno);
  auto b = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_NE(kept_map_id(b->control()), old_id) << "the replaced pin's old map was reused";
  EXPECT_EQ(kept_map_id(b->control()), kept_map_id(other.get()));
  expect_pinned(*b);
}

TEST_F(KeptMapsTest, AMissingPinIsPinnedAgainAndOpened) {
  auto a = NetfaultMaps::open(layout_, true);
  ASSERT_TRUE(a.ok()) << a.error().describe();
  ASSERT_TRUE(NetfaultMaps::open(layout_, false).ok());
  ASSERT_EQ(::unlink(layout_.map("fl_rng").c_str()), 0) << std::strerror(errno);
  auto b = NetfaultMaps::open(layout_, false);
  // Without fl_rng the open loads the object to pin it again (a state from
  // before the map): either way, what comes back is what is pinned.
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_EQ(kept_map_id(b->rng()), kept_pin_id(layout_.map("fl_rng")));
  EXPECT_NE(kept_map_id(b->rng()), 0u);
}

TEST_F(KeptMapsTest, ATornDownStateIsMadeAgainNotReused) {
  uint32_t old_control = 0, old_meta = 0;
  {
    auto a = NetfaultMaps::open(layout_, true);
    ASSERT_TRUE(a.ok()) << a.error().describe();
    old_control = kept_map_id(a->control());
    old_meta = kept_map_id(a->meta());
  }  // nothing of ours holds the old maps now but the kept fds
  unpin_all();
  auto gone = NetfaultMaps::open(layout_, false);
  EXPECT_FALSE(gone.ok()) << "a torn-down state is not installed, kept fds or not";
  auto b = NetfaultMaps::open(layout_, true);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_TRUE(b->created()) << "the maps are made again";
  EXPECT_NE(kept_map_id(b->control()), old_control);
  EXPECT_NE(kept_map_id(b->meta()), old_meta);
  expect_pinned(*b);
  auto c = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(c.ok()) << c.error().describe();
  expect_pinned(*c);
}

TEST_F(KeptMapsTest, WithoutKeepingEveryOpenOpensThePins) {
  NetfaultMaps::keep_open(false);
  auto a = NetfaultMaps::open(layout_, true);
  ASSERT_TRUE(a.ok()) << a.error().describe();
  auto b = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_NE(a->control(), b->control()) << "fds of their own";
  EXPECT_EQ(kept_map_id(a->control()), kept_map_id(b->control())) << "of the same maps";
}

}  // namespace
}  // namespace faultline::bpftest
