// The feature probes of a boot, cached in the state folder: what is believed,
// what is not, and that `faultctl features` writes what a later process reads.
#include "loader/feature_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/files.h"

namespace faultline {
namespace {

Features probed_sample() {
  Features f;
  f.tcx = {true, "attached a TCX link"};
  f.sch_fq = {false, "no fq qdisc: modprobe sch_fq"};
  f.bpf_lsm = {false, "bpf is not in /sys/kernel/security/lsm"};
  f.cgroup_v2_mount = "/sys/fs/cgroup";
  return f;
}

FeatureCacheKey cache_key(const std::string& boot, const std::string& probes = "full") {
  return FeatureCacheKey{boot, "6.18.0-test", "/usr/bin/faultctl 123 456", probes};
}

class FeatureCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED: the feature cache is root's (run the unit tests as root)";
    auto d = TempFolder::create("fl-feature-cache-");
    ASSERT_TRUE(d) << d.error().describe();
    dir_.emplace(std::move(*d));
    path_ = dir_->path() + "/run/features.json";
  }
  std::optional<TempFolder> dir_;
  std::string path_;
};

TEST(FeatureCacheJson, EveryProbeRoundTrips) {
  const Features f = probed_sample();
  auto back = features_from_json(features_to_json(f));
  ASSERT_TRUE(back);
  EXPECT_EQ(features_to_json(*back), features_to_json(f));
  EXPECT_TRUE(back->tcx.available);
  EXPECT_EQ(back->sch_fq.detail, "no fq qdisc: modprobe sch_fq");
  EXPECT_EQ(back->cgroup_v2_mount, "/sys/fs/cgroup");
}

TEST(FeatureCacheJson, AnEntryMissingAProbeIsNotBelieved) {
  std::string text = features_to_json(probed_sample());
  const auto at = text.find("\"tcx\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 5, "\"tcy\"");
  EXPECT_FALSE(features_from_json(text));
  EXPECT_FALSE(features_from_json("{\"tcx\": 1"));
}

TEST(FeatureCacheKeyTest, ThisProcessHasOne) {
  auto k = FeatureCacheKey::current("packet");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->boot_id.size(), 36u) << k->boot_id;
  EXPECT_FALSE(k->release.empty());
  EXPECT_NE(k->binary.find("unit_tests"), std::string::npos) << k->binary;
  EXPECT_EQ(k->probes, "packet");
}

TEST_F(FeatureCacheTest, WrittenThenReadForTheSameKeyOnly) {
  ASSERT_TRUE(write_cached_features(path_, cache_key("boot-a"), probed_sample()));
  auto hit = read_cached_features(path_, cache_key("boot-a"));
  ASSERT_TRUE(hit);
  EXPECT_EQ(features_to_json(*hit), features_to_json(probed_sample()));
  EXPECT_FALSE(read_cached_features(path_, cache_key("boot-a", "packet"))) << "another probe set";
  EXPECT_FALSE(read_cached_features(path_, cache_key("boot-b"))) << "another boot";
  FeatureCacheKey rebuilt = cache_key("boot-a");
  rebuilt.binary = "/usr/bin/faultctl 124 456";
  EXPECT_FALSE(read_cached_features(path_, rebuilt)) << "another binary";
  FeatureCacheKey upgraded = cache_key("boot-a");
  upgraded.release = "6.18.1";
  EXPECT_FALSE(read_cached_features(path_, upgraded)) << "another kernel";
}

TEST_F(FeatureCacheTest, OtherEntriesOfTheBootStayAndOldBootsGo) {
  ASSERT_TRUE(write_cached_features(path_, cache_key("boot-old"), probed_sample()));
  ASSERT_TRUE(write_cached_features(path_, cache_key("boot-a", "packet"), probed_sample()));
  ASSERT_TRUE(write_cached_features(path_, cache_key("boot-a", "full"), probed_sample()));
  EXPECT_TRUE(read_cached_features(path_, cache_key("boot-a", "packet")));
  EXPECT_TRUE(read_cached_features(path_, cache_key("boot-a", "full")));
  EXPECT_FALSE(read_cached_features(path_, cache_key("boot-old")));
  for (int i = 0; i < 12; ++i)
    ASSERT_TRUE(write_cached_features(path_, cache_key("boot-a", "p" + std::to_string(i)), probed_sample()));
  auto text = read_text_file(path_);
  ASSERT_TRUE(text);
  size_t entries = 0;
  for (size_t at = text->find("\"key\""); at != std::string::npos; at = text->find("\"key\"", at + 1)) ++entries;
  EXPECT_EQ(entries, 8u) << "at most 8 entries";
  EXPECT_TRUE(read_cached_features(path_, cache_key("boot-a", "p11")));
}

TEST_F(FeatureCacheTest, AFileOthersCanWriteOrGarbageIsNotBelieved) {
  ASSERT_TRUE(write_cached_features(path_, cache_key("boot-a"), probed_sample()));
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  EXPECT_FALSE(read_cached_features(path_, cache_key("boot-a"))) << "world-writable";
  ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);
  EXPECT_TRUE(read_cached_features(path_, cache_key("boot-a")));
  ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(read_cached_features(path_, cache_key("boot-a"))) << "not root's";
  std::ofstream(path_, std::ios::trunc) << "{\"entries\": [ {\"key\": ";
  ASSERT_EQ(::chown(path_.c_str(), 0, 0), 0);
  EXPECT_FALSE(read_cached_features(path_, cache_key("boot-a"))) << "cut short";
  ASSERT_TRUE(write_cached_features(path_, cache_key("boot-a"), probed_sample())) << "a bad file is replaced";
  EXPECT_TRUE(read_cached_features(path_, cache_key("boot-a")));
}

}  // namespace
}  // namespace faultline
