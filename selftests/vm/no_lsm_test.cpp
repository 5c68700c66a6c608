// The silent LSM trap: booted with an lsm= list without bpf, LSM programs would
// load and attach and never run. faultctl must say so and refuse (or fall back
// to seccomp for a wrapped command) instead of pretending.
#include <gtest/gtest.h>

#include <regex>

#include "vm_util.h"

namespace flvm {
namespace {

TEST(NoBpfLsm, FeaturesReportBpfLsmInactive) {
  auto r = run({bin("faultctl"), "features"});
  EXPECT_EQ(r.status.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nlsm_bpf_listed\s+no)"))) << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(\nbpf_lsm\s+no\s+LSM programs attach but bpf is not an active LSM)")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(any-syscall errno\s+(uses:\s+)?seccomp)"))) << r.out;
}

TEST(NoBpfLsm, PidFaultIsRefusedNotPretended) {
  write_file("/tmp/fl-vm-data", "x\n");
  Probe target;
  auto r = run({bin("faultctl"), "run", "syscall", "--syscall", "openat", "--errno", "EACCES", "--duration", "2s",
                "--pid", std::to_string(target.pid())});
  EXPECT_NE(r.status.code, 0) << r.out;
  EXPECT_NE(r.out.find("bpf is not an active LSM"), std::string::npos) << "the refusal must name the cause: " << r.out;
  EXPECT_EQ(target.call("open /tmp/fl-vm-data"), "OK");
  auto forced = run({bin("faultctl"), "run", "syscall", "--syscall", "openat", "--errno", "EACCES", "--duration", "2s",
                     "--pid", std::to_string(target.pid()), "--via", "lsm"});
  EXPECT_NE(forced.status.code, 0) << forced.out;
}

TEST(NoBpfLsm, WrappedCommandFallsBackToSeccomp) {
  write_file("/tmp/fl-vm-data", "x\n");
  auto dry = run({bin("faultctl"), "run", "syscall", "--syscall", "openat", "--errno", "EIO", "--duration", "2s",
                  "--dry-run", "--", bin("fl-vmprobe"), "once", "open", "/tmp/fl-vm-data"});
  EXPECT_EQ(dry.status.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("seccomp user notification"), std::string::npos) << dry.out;
  auto r = run({bin("faultctl"), "run", "syscall", "--syscall", "openat", "--errno", "EIO", "--duration", "5s", "--",
                bin("fl-vmprobe"), "once", "open", "/tmp/fl-vm-data"});
  EXPECT_EQ(r.status.code, 1) << r.out;
  EXPECT_NE(r.out.find("EIO"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seccomp"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace flvm
