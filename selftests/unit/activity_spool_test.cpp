// The activity spool: what is appended comes back at start, batches respect
// both limits, only lines faultcp confirmed leave, a torn last line is cut,
// and one guard holds a spool at a time.
#include "userspace/guard/activity_spool.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace faultline {
namespace {

class ActivitySpoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fl-spool-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/spool.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static SpooledLine line(const std::string& who, uint64_t seq) {
    return {who, seq, R"({"seq":)" + std::to_string(seq) + R"(,"identity":")" + who + "\"}\n"};
  }
  std::string file() const {
    std::ifstream in(path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_, path_;
};

TEST_F(ActivitySpoolTest, LinesOutliveTheSpoolUntilConfirmed) {
  {
    auto s = ActivitySpool::open(path_);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    for (uint64_t i = 1; i <= 5; ++i) ASSERT_TRUE((*s)->append(line("alice", i)).ok());
    ASSERT_TRUE((*s)->append(line("bob", 1)).ok());
    // faultcp stored alice up to 2 of a batch of 3: alice 3 stays.
    auto d = (*s)->drop(3, {{"alice", 2}});
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, 2u);
    EXPECT_EQ((*s)->size(), 4u);
    EXPECT_EQ((*s)->front(10, 1 << 20).front().seq, 3u);
  }
  // A new guard finds what is left (and the confirmed lines still in the
  // file: faultcp counts them duplicates when they come again).
  auto s = ActivitySpool::open(path_);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  EXPECT_EQ((*s)->size(), 6u);
  auto all = (*s)->front(10, 1 << 20);
  auto d = (*s)->drop(all.size(), {{"alice", 5}, {"bob", 1}});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*s)->size(), 0u);
  EXPECT_EQ(file(), "") << "an emptied spool is truncated";
  ASSERT_TRUE((*s)->append(line("alice", 6)).ok());
  EXPECT_EQ(file(), line("alice", 6).line);
}

TEST_F(ActivitySpoolTest, BatchesKeepToBothLimits) {
  auto s = ActivitySpool::open(path_);
  ASSERT_TRUE(s.ok());
  for (uint64_t i = 1; i <= 300; ++i) ASSERT_TRUE((*s)->append(line("a", i)).ok());
  EXPECT_EQ((*s)->front(200, 1 << 20).size(), 200u);
  const size_t one = line("a", 1).line.size();
  EXPECT_EQ((*s)->front(200, one * 3 + 1).size(), 3u);
  EXPECT_EQ((*s)->front(200, 1).size(), 1u) << "a line larger than the limit still goes, alone";
}

TEST_F(ActivitySpoolTest, ATornLastLineIsCutAndAStrangerIsRefused) {
  std::ofstream(path_) << line("a", 1).line << R"({"seq":2,"iden)";
  auto s = ActivitySpool::open(path_);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  EXPECT_EQ((*s)->size(), 1u);
  EXPECT_EQ(file(), line("a", 1).line);
  auto second = ActivitySpool::open(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("another guard"), std::string::npos) << second.error().message;
  s->reset();
  std::ofstream(path_, std::ios::app) << "not json\n";
  auto bad = ActivitySpool::open(path_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 2 is not an activity line"), std::string::npos) << bad.error().message;
}

TEST_F(ActivitySpoolTest, ConfirmedLinesAreRewrittenAwayOnceTheyOutnumberTheRest) {
  auto s = ActivitySpool::open(path_);
  ASSERT_TRUE(s.ok());
  for (uint64_t i = 1; i <= 2100; ++i) ASSERT_TRUE((*s)->append(line("a", i)).ok());
  for (int b = 0; b < 7; ++b) {
    auto d = (*s)->drop(200, {{"a", 200 * (b + 1)}});
    ASSERT_TRUE(d.ok());
  }
  // Rewritten at the 6th batch (1200 confirmed: over 1024 and the 900 left);
  // the 7th's 200 stay in the file until the next rewrite.
  EXPECT_EQ((*s)->size(), 700u);
  EXPECT_EQ(file().substr(0, line("a", 1201).line.size()), line("a", 1201).line);
}

}  // namespace
}  // namespace faultline
