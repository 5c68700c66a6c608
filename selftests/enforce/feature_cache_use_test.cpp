// The boot's feature probes kept in the state folder, seen from real faultctl
// processes: a second one loads no probe program, a file that cannot be
// believed (garbage, writable by others) or another binary probes again, and
// what it probes is written back. The bpf() calls are counted with strace.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "enforce_env.h"

namespace flenf {
namespace {

class FeatureCacheUseTest : public EnforceTest {
 protected:
  void SetUp() override {
    EnforceTest::SetUp();
    if (IsSkipped()) return;
    if (::access("/usr/bin/strace", X_OK) != 0) GTEST_SKIP() << "strace is missing: run scripts/install-deps.sh";
    cache_ = state_dir_ + "/run/features.json";
    trace_ = state_dir_ + "/bpf.trace";
  }

  // Programs loaded by one `faultctl run loss ... --dry-run` of `faultctl`
  // (a dry run plans the fault: the packet probes, and nothing else loads).
  int program_loads(const std::string& faultctl) {
    auto r = run({"strace", "-f", "-e", "trace=bpf", "-o", trace_, faultctl, "run", "loss", "--percent", "1",
                  "--target", "198.51.100.1", "--duration", "1s", "--dry-run"},
                 60s);
    EXPECT_TRUE(r.status.is(0)) << r.describe();
    EXPECT_NE(r.out.find("dry run: would apply loss 1%"), std::string::npos) << r.out;
    std::ifstream in(trace_);
    int loads = 0;
    for (std::string line; std::getline(in, line);) loads += line.find("bpf(BPF_PROG_LOAD") != std::string::npos;
    return loads;
  }

  [[nodiscard]] bool cache_has_entries() const {
    std::ifstream in(cache_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str().find("\"entries\"") != std::string::npos && text.str().find("\"tcx\"") != std::string::npos;
  }

  std::string cache_, trace_;
};

TEST_F(FeatureCacheUseTest, ASecondFaultctlLoadsNoProbeAndABadFileOrAnotherBinaryProbesAgain) {
  ASSERT_GT(program_loads(kFaultctl), 0) << "nothing cached yet: the first run probes";
  ASSERT_TRUE(cache_has_entries()) << "the first run writes " << cache_;
  EXPECT_EQ(program_loads(kFaultctl), 0) << "the second run reads the boot's probes";

  std::ofstream(cache_, std::ios::trunc) << "{\"entries\": [ {\"key\": ";
  EXPECT_GT(program_loads(kFaultctl), 0) << "a file cut short is not believed";
  EXPECT_TRUE(cache_has_entries()) << "and is written again";
  EXPECT_EQ(program_loads(kFaultctl), 0);

  ASSERT_EQ(::chmod(cache_.c_str(), 0666), 0);
  EXPECT_GT(program_loads(kFaultctl), 0) << "a file others can write is not believed";
  struct stat st {};
  ASSERT_EQ(::stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0U) << "the file written again is root's alone";

  // Another binary (a copy elsewhere: another path, another mtime) is another key.
  const std::string copy = state_dir_ + "/faultctl-copy";
  std::filesystem::copy_file(kFaultctl, copy);
  ASSERT_EQ(::chmod(copy.c_str(), 0755), 0);
  EXPECT_GT(program_loads(copy), 0) << "another binary probes for itself";
  EXPECT_EQ(program_loads(copy), 0);
  EXPECT_EQ(program_loads(kFaultctl), 0) << "the first binary's entry is kept beside it";
  std::filesystem::remove(copy);
}

}  // namespace
}  // namespace flenf
