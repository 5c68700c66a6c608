// State pinned before two maps were renamed (fl_lossst -> fl_loss_state,
// fl_exfilt -> fl_exact_bloom): opening it carries the same maps on under the
// new names, and uninstall leaves no pin behind, old name or new.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "base/unique_fd.h"
#include "faultline/abi.h"
#include "loader/bpffs.h"
#include "loader/netfault_attachments.h"
#include "loader/netfault_maps.h"
#include "loader/netfault_object.h"
#include "netfault.skel.h"
#include "selftests/lib/require_root.h"
#include "userspace/faults/packet/netfault_engine.h"

namespace faultline::bpftest {
namespace {

uint32_t map_id(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

uint32_t pinned_map_id(const std::string& path) {
  UniqueFd fd(bpf_obj_get(path.c_str()));
  return fd ? map_id(fd.get()) : 0;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The two maps as the object defined them before the rename.
struct RetiredMap {
  const char* retired;
  const char* current;
  bpf_map_type type;
  uint32_t value_size;
  uint32_t max_entries;
  uint32_t flags;
};
const RetiredMap kLossState{"fl_lossst",           "fl_loss_state", BPF_MAP_TYPE_PERCPU_ARRAY,
                            sizeof(fl_loss_state), FL_MAX_FAULTS,   0};
const RetiredMap kExactBloom{"fl_exfilt",           "fl_exact_bloom", BPF_MAP_TYPE_ARRAY, sizeof(fl_exact_bloom_block),
                             FL_EXACT_BLOOM_BLOCKS, BPF_F_MMAPABLE};

class RenamedPinsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("pinning maps under /sys/fs/bpf");
    layout_.root = "/sys/fs/bpf/fltest-pins-" + std::to_string(::getpid());
    auto maps = NetfaultMaps::open(layout_, true);
    pinned_ = true;  // from here on TearDown has pins and folders to remove
    ASSERT_TRUE(maps.ok()) << maps.error().describe();
    ASSERT_TRUE(maps->created());
  }

  void TearDown() override {
    if (!pinned_) return;
    for (const auto& name : NetfaultMaps::names()) ::unlink(layout_.map(name).c_str());
    for (const auto& name : NetfaultMaps::retired_names()) ::unlink(layout_.map(name).c_str());
    remove_bpffs_dirs(layout_);
    remove_layout_locks(layout_);
    EXPECT_FALSE(exists(layout_.root)) << "left behind: " << layout_.root;
  }

  // A map pinned under its retired name, with the kernel name it was created
  // with back then (libbpf must reuse it all the same). Returns its id.
  uint32_t pin_retired(const RetiredMap& m) const {
    LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = m.flags);
    UniqueFd fd(bpf_map_create(m.type, m.retired, sizeof(uint32_t), m.value_size, m.max_entries, &o));
    EXPECT_TRUE(fd.valid()) << "cannot create a map like " << m.retired << ": " << std::strerror(errno);
    EXPECT_EQ(bpf_obj_pin(fd.get(), layout_.map(m.retired).c_str()), 0) << std::strerror(errno);
    return map_id(fd.get());
  }

  // What an install made before the rename left: only the retired pin.
  uint32_t pin_as_before_rename(const RetiredMap& m) const {
    EXPECT_EQ(::unlink(layout_.map(m.current).c_str()), 0) << std::strerror(errno);
    return pin_retired(m);
  }

  BpffsLayout layout_;
  bool pinned_ = false;
};

TEST_F(RenamedPinsTest, RetiredPinsCarryOnUnderTheirNewNames) {
  const uint32_t loss = pin_as_before_rename(kLossState), bloom = pin_as_before_rename(kExactBloom);
  ASSERT_NE(loss, 0u);
  ASSERT_NE(bloom, 0u);

  auto maps = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(maps.ok()) << maps.error().describe();
  EXPECT_EQ(map_id(maps->loss_state()), loss) << "fl_lossst's map must carry on as fl_loss_state, not be replaced";
  EXPECT_EQ(map_id(maps->exact_bloom()), bloom) << "fl_exfilt's map must carry on as fl_exact_bloom, not be replaced";
  EXPECT_FALSE(exists(layout_.map("fl_lossst"))) << "the retired pin should have moved";
  EXPECT_FALSE(exists(layout_.map("fl_exfilt"))) << "the retired pin should have moved";

  // Programs loaded from now on share those maps with the ones attached before.
  auto obj = NetfaultObject::load(layout_, 0, FL_EGRESS_DROP_REDIRECT);
  ASSERT_TRUE(obj.ok()) << obj.error().describe();
  EXPECT_EQ(map_id(bpf_map__fd(obj->skeleton()->maps.fl_loss_state)), loss);
  EXPECT_EQ(map_id(bpf_map__fd(obj->skeleton()->maps.fl_exact_bloom)), bloom);
}

TEST_F(RenamedPinsTest, ARetiredPinBesideTheCurrentOneIsALeftoverAndGoes) {
  const uint32_t current = pinned_map_id(layout_.map("fl_exact_bloom"));
  ASSERT_NE(current, 0u);
  ASSERT_NE(pin_retired(kExactBloom), 0u);

  auto maps = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(maps.ok()) << maps.error().describe();
  EXPECT_EQ(map_id(maps->exact_bloom()), current) << "the current pin wins over a leftover retired one";
  EXPECT_FALSE(exists(layout_.map("fl_exfilt")));
}

TEST_F(RenamedPinsTest, UninstallOfStateFromBeforeTheRenameLeavesNoPin) {
  ASSERT_NE(pin_as_before_rename(kLossState), 0u);
  ASSERT_NE(pin_as_before_rename(kExactBloom), 0u);

  // Quiet: the orphan sweep queries the tc hooks of every device, and libbpf
  // prints each one that has none.
  libbpf_print_fn_t prev = libbpf_set_print(nullptr);
  auto st = NetfaultEngine(layout_).uninstall();
  libbpf_set_print(prev);
  ASSERT_TRUE(st.ok()) << st.error().describe();
  EXPECT_FALSE(exists(layout_.root)) << "uninstall left pins or folders under " << layout_.root;
}

}  // namespace
}  // namespace faultline::bpftest

namespace faultline::bpftest {
namespace {

// State pinned before fl_budget existed: the next open pins the map and keeps
// every other map; a program loaded against other state's fl_budget (as one
// attached by an older faultctl, which has none) is told apart by the kernel's
// map list, which is what refuses a capped fault on it.
TEST_F(RenamedPinsTest, StateFromBeforeTheBudgetMapGetsItAndOldProgramsAreToldApart) {
  auto before = NetfaultObject::load(layout_, 0, FL_EGRESS_DROP_REDIRECT);
  ASSERT_TRUE(before.ok()) << before.error().describe();
  const uint32_t faults = pinned_map_id(layout_.map("fl_faults"));
  ASSERT_EQ(::unlink(layout_.map("fl_budget").c_str()), 0) << std::strerror(errno);

  auto maps = NetfaultMaps::open(layout_, false);
  ASSERT_TRUE(maps.ok()) << maps.error().describe();
  EXPECT_TRUE(exists(layout_.map("fl_budget"))) << "opening old state pins the missing map";
  EXPECT_EQ(pinned_map_id(layout_.map("fl_faults")), faults) << "the other maps are reused, not replaced";

  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd(before->egress_fd(), &info, &len), 0);
  EXPECT_FALSE(prog_uses_map(info.id, maps->budget())) << "the earlier program does not read the new fl_budget";
  auto after = NetfaultObject::load(layout_, 0, FL_EGRESS_DROP_REDIRECT);
  ASSERT_TRUE(after.ok()) << after.error().describe();
  len = sizeof(info);
  info = {};
  ASSERT_EQ(bpf_obj_get_info_by_fd(after->egress_fd(), &info, &len), 0);
  EXPECT_TRUE(prog_uses_map(info.id, maps->budget())) << "a program loaded now reads it";
}

}  // namespace
}  // namespace faultline::bpftest
