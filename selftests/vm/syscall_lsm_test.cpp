// `faultctl run syscall` through BPF LSM on a kernel where bpf is an active LSM:
// every operation fails for the target (a pid or a cgroup) and only for it, ends
// on time, and is gone once the fault ends.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "vm_util.h"

namespace flvm {
namespace {

const std::string kFile = "/tmp/fl-vm-data";

// `faultctl run syscall ARGS --json` in the background, once it reports "started".
ChildProcess start_fault(const std::vector<std::string>& args, const std::string& want_mechanism = "lsm") {
  std::vector<std::string> argv = {bin("faultctl"), "run", "syscall", "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess b = start(argv);
  EXPECT_TRUE(b.wait_for("\"started\"", 20s)) << b.out();
  EXPECT_NE(b.out().find("\"mechanism\":\"" + want_mechanism + "\""), std::string::npos) << b.out();
  return b;
}

// Waits for the fault to end by itself; returns its "ended" event.
nlohmann::json ended(ChildProcess& b, Millis timeout = 20s) {
  auto code = b.wait(timeout);
  EXPECT_TRUE(code.has_value()) << "faultctl did not end: " << b.out();
  EXPECT_TRUE(code && code->is(0)) << b.out();
  std::istringstream in(b.out());
  nlohmann::json last;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "ended") last = j;
  }
  EXPECT_TRUE(last.is_object()) << b.out();
  return last;
}

class LsmSyscall : public ::testing::Test {
 protected:
  void SetUp() override {
    FLVM_REQUIRE_PROBE("bpf_lsm");
    write_file(kFile, "faultline\n");
  }
  void TearDown() override { ::unlink(kFile.c_str()); }
};

TEST_F(LsmSyscall, DryRunChoosesLsmForFileSyscalls) {
  Probe target;
  auto r = run({bin("faultctl"), "run", "syscall", "--syscall", "openat,read,write,unlink,execve", "--errno", "EIO",
                "--duration", "1s", "--pid", std::to_string(target.pid()), "--dry-run"});
  EXPECT_EQ(r.status.code, 0) << r.out;
  EXPECT_NE(r.out.find("BPF LSM hooks"), std::string::npos) << r.out;
}

TEST_F(LsmSyscall, OpenFailsWithEaccesForThePidOnly) {
  Probe target, other;
  ASSERT_EQ(target.call("open " + kFile), "OK");
  auto f = start_fault(
      {"--syscall", "openat", "--errno", "EACCES", "--duration", "3s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("open " + kFile), "EACCES");
  EXPECT_EQ(target.call("open /etc/hostname"), "EACCES");
  EXPECT_EQ(other.call("open " + kFile), "OK") << "a process outside the scope must be untouched";
  auto e = ended(f);
  EXPECT_EQ(e.value("injected", 0), 2) << e.dump();
  EXPECT_EQ(target.call("open " + kFile), "OK") << "the fault must be gone once it ended";
}

// faultctl status lists the fault (sN) with the kernel's counters, and abort sN
// disarms it in the kernel at once: the next open passes.
TEST_F(LsmSyscall, StatusListsItAndAbortEndsIt) {
  Probe target;
  auto f = start_fault(
      {"--syscall", "openat", "--errno", "EIO", "--duration", "60s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("open " + kFile), "EIO");
  auto st = run({bin("faultctl"), "status", "--json"});
  ASSERT_EQ(st.status.code, 0) << st.out;
  auto j = nlohmann::json::parse(st.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j["syscall_faults"].size() == 1) << st.out;
  EXPECT_EQ(j["syscall_faults"][0]["mechanism"], "lsm") << st.out;
  EXPECT_EQ(j["syscall_faults"][0]["counters"]["failed"], 1) << st.out;
  const std::string id = j["syscall_faults"][0]["id"];
  auto a = run({bin("faultctl"), "abort", id});
  EXPECT_EQ(a.status.code, 0) << a.out;
  EXPECT_EQ(target.call("open " + kFile), "OK") << "the fault outlived its abort";
  auto code = f.wait(10s);
  EXPECT_TRUE(code && code->is(1)) << "an aborted fault without a command exits 1\n" << f.out();
  EXPECT_NE(f.out().find("\"reason\":\"aborted\""), std::string::npos) << f.out();
}

TEST_F(LsmSyscall, OpenFailsWithEioForACgroupAndItsDescendants) {
  TestCgroup outer("fl-vm-scope");
  TestCgroup inner("fl-vm-scope/inner");
  Probe direct(outer.path()), nested(inner.path()), other;
  ASSERT_EQ(nested.call("open " + kFile), "OK");
  auto f = start_fault({"--syscall", "open,openat", "--errno", "EIO", "--duration", "3s", "--cgroup", "fl-vm-scope"});
  EXPECT_EQ(direct.call("open " + kFile), "EIO");
  EXPECT_EQ(nested.call("open " + kFile), "EIO") << "a child cgroup is part of the scope";
  EXPECT_EQ(other.call("open " + kFile), "OK");
  (void)ended(f);
  EXPECT_EQ(nested.call("open " + kFile), "OK");
}

TEST_F(LsmSyscall, ExecIsDeniedForThePid) {
  Probe target, other;
  auto f = start_fault(
      {"--syscall", "execve", "--errno", "EACCES", "--duration", "3s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("exec /bin/true"), "EACCES");
  EXPECT_EQ(other.call("exec /bin/true"), "EOF") << "the other process must exec (and so close the channel)";
  (void)ended(f);
  EXPECT_EQ(target.call("exec /bin/true"), "EOF") << "exec must work again after the fault";
}

// A listening socket: connect would succeed, so ECONNREFUSED can only be the fault.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sin);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)), 0);
    EXPECT_EQ(::listen(fd_, 128), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&sin), &len);
    port_ = ntohs(sin.sin_port);
  }
  ~Listener() { ::close(fd_); }
  [[nodiscard]] std::string port() const { return std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

void connect_refused_via(const std::string& via) {
  Listener l;
  Probe target, other;
  const std::string op = "connect 127.0.0.1 " + l.port();
  ASSERT_EQ(target.call(op), "OK") << "before the fault";
  std::vector<std::string> args = {"--syscall",  "connect", "--errno", "ECONNREFUSED",
                                   "--duration", "3s",      "--pid",   std::to_string(target.pid())};
  if (!via.empty()) args.insert(args.end(), {"--via", via});
  auto f = start_fault(args, via.empty() ? "cgroup" : via);
  EXPECT_EQ(target.call(op), "ECONNREFUSED");
  EXPECT_EQ(other.call(op), "OK");
  (void)ended(f);
  EXPECT_EQ(target.call(op), "OK") << "after the fault";
}

TEST_F(LsmSyscall, ConnectIsRefusedThroughLsm) { connect_refused_via("lsm"); }

// The default rung for connect stays the cgroup hooks; checked here on 6.1 too.
TEST_F(LsmSyscall, ConnectIsRefusedThroughCgroupHooksByDefault) { connect_refused_via(""); }

TEST_F(LsmSyscall, ReadAndWriteFailWithEio) {
  Probe target, other;
  const std::string out = "/tmp/fl-vm-out";
  auto f = start_fault(
      {"--syscall", "read,write", "--errno", "EIO", "--duration", "3s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("read " + kFile), "EIO");
  EXPECT_EQ(target.call("write " + out), "EIO");
  EXPECT_EQ(other.call("read " + kFile), "OK");
  EXPECT_EQ(other.call("write " + out), "OK");
  (void)ended(f);
  EXPECT_EQ(target.call("read " + kFile), "OK");
  EXPECT_EQ(target.call("write " + out), "OK");
  ::unlink(out.c_str());
}

TEST_F(LsmSyscall, UnlinkFailsWithEperm) {
  Probe target, other;
  auto f = start_fault(
      {"--syscall", "unlink,unlinkat", "--errno", "EPERM", "--duration", "3s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("unlink /tmp/fl-vm-gone-a"), "EPERM");
  EXPECT_EQ(other.call("unlink /tmp/fl-vm-gone-b"), "OK");
  (void)ended(f);
  EXPECT_EQ(target.call("unlink /tmp/fl-vm-gone-a"), "OK");
}

TEST_F(LsmSyscall, PercentIsTheShareOfCallsFailed) {
  Probe target;
  auto f = start_fault({"--syscall", "openat", "--errno", "EIO", "--percent", "30", "--duration", "10s", "--pid",
                        std::to_string(target.pid())});
  const int n = 4000;
  const double failed = std::stod(target.call("openloop " + kFile + " " + std::to_string(n), 60s));
  f.signal(SIGINT);
  (void)f.wait(10s);
  // Binomial sd at 30% of 4000 is 29 calls (0.7%): 3% is more than four sd.
  EXPECT_NEAR(100.0 * failed / n, 30, 3) << failed << " of " << n << " opens failed";
  std::printf("vmtest-figure: --percent 30 on openat: %.1f%% of %d opens failed\n", 100.0 * failed / n, n);
}

// The brakes in the LSM programs: 20 opens, --after 5, cap 7 at 100%: exactly 7
// fail (calls 6-12), counted by the kernel; status shows the cap reached.
TEST_F(LsmSyscall, AfterAndCapFailExactlyTheCalledFor) {
  Probe target;
  auto f = start_fault({"--syscall", "openat", "--errno", "EIO", "--after", "5", "--max-injections", "7", "--duration",
                        "30s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("openloop " + kFile + " 20", 60s), "7");
  auto st = run({bin("faultctl"), "status", "--json"});
  auto j = nlohmann::json::parse(st.out, nullptr, false);
  ASSERT_TRUE(j.is_object() && j["syscall_faults"].size() == 1) << st.out;
  EXPECT_EQ(j["syscall_faults"][0]["counters"]["cap"], 7) << st.out;
  EXPECT_EQ(j["syscall_faults"][0]["counters"]["cap_spared"], 8) << st.out;
  f.signal(SIGINT);
  (void)f.wait(10s);
  EXPECT_NE(f.out().find("\"reached\":true"), std::string::npos) << f.out();
}

TEST_F(LsmSyscall, StartAfterLetsEarlyCallsPass) {
  Probe target;
  auto f = start_fault({"--syscall", "openat", "--errno", "EIO", "--start-after", "2s", "--duration", "10s", "--pid",
                        std::to_string(target.pid())});
  EXPECT_EQ(target.call("open " + kFile), "OK") << "before --start-after";
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(target.call("open " + kFile), "EIO") << "after --start-after";
  f.signal(SIGINT);
  (void)f.wait(10s);
}

// The in-kernel deadman: a stopped faultctl cannot keep the fault alive.
TEST_F(LsmSyscall, FaultEndsAtItsExpiryEvenIfFaultctlIsStopped) {
  Probe target;
  auto f = start_fault(
      {"--syscall", "openat", "--errno", "EACCES", "--duration", "2s", "--pid", std::to_string(target.pid())});
  f.signal(SIGSTOP);
  EXPECT_EQ(target.call("open " + kFile), "EACCES");
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(target.call("open " + kFile), "OK") << "the programs are still attached but the fault has expired";
  f.signal(SIGCONT);
  (void)ended(f);
}

TEST_F(LsmSyscall, KillingFaultctlEndsTheFaultAtOnce) {
  Probe target;
  auto f = start_fault(
      {"--syscall", "openat", "--errno", "EACCES", "--duration", "30s", "--pid", std::to_string(target.pid())});
  EXPECT_EQ(target.call("open " + kFile), "EACCES");
  f.signal(SIGKILL);
  (void)f.wait(5s);
  EXPECT_EQ(target.call("open " + kFile), "OK") << "the private, unpinned links go with their process";
}

// A wrapped command runs in a fresh cgroup: its own start (exec, the loader's
// library opens) is never failed, its own calls are.
TEST_F(LsmSyscall, WrappedCommandMeetsTheFaultInItsOwnCode) {
  auto r = run({bin("faultctl"), "run", "syscall", "--syscall", "openat", "--errno", "EIO", "--duration", "5s", "--",
                bin("fl-vmprobe"), "once", "open", kFile});
  EXPECT_EQ(r.status.code, 1) << r.out;
  EXPECT_NE(r.out.find("EIO"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("BPF LSM"), std::string::npos) << r.out;
  auto x = run({bin("faultctl"), "run", "syscall", "--syscall", "execve", "--errno", "EACCES", "--duration", "5s", "--",
                bin("fl-vmprobe"), "once", "exec", "/bin/true"});
  EXPECT_EQ(x.status.code, 1) << x.out;
  EXPECT_NE(x.out.find("EACCES"), std::string::npos) << "the command starts; the exec it makes is denied: " << x.out;
}

// seccomp user notification, forced with --via seccomp, on a kernel where BPF LSM
// would be chosen: a wrapped command's open fails with the errno asked for.
TEST(SeccompSyscall, WrappedCommandGetsTheErrno) {
  FLVM_REQUIRE_PROBE("seccomp_user_notif");
  write_file(kFile, "faultline\n");
  auto r = run({bin("faultctl"), "run", "syscall", "--syscall", "openat", "--errno", "EROFS", "--duration", "5s",
                "--via", "seccomp", "--", bin("fl-vmprobe"), "once", "open", kFile});
  EXPECT_EQ(r.status.code, 1) << r.out;
  EXPECT_NE(r.out.find("EROFS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seccomp"), std::string::npos) << r.out;
  ::unlink(kFile.c_str());
}

// What the probes say must match what the kernel offers, and faultctl must pick
// the best rung of each ladder: TCX where it attaches (6.6+), clsact otherwise.
TEST(Features, MechanismsFollowTheProbes) {
  auto r = run({bin("faultctl"), "features"});
  EXPECT_EQ(r.status.code, 0) << r.out;
  ASSERT_TRUE(features().contains("probes")) << "faultctl features --json gave no probes";
  EXPECT_TRUE(probe_available("clsact")) << probe_detail("clsact");
  EXPECT_EQ(capability_uses("packet faults"), probe_available("tcx") ? "tcx" : "tc clsact + cls_bpf");
  if (probe_available("tcx")) {
    EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(packet faults\s+(uses:\s+)?tcx)"))) << r.out;
  } else {
    EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(packet faults\s+(uses:\s+)?tc clsact)"))) << r.out;
  }
  if (probe_available("sch_fq")) {
    EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(delay, jitter, rate\s+(uses:\s+)?EDT \+ sch_fq)"))) << r.out;
  }
}

TEST(Features, ReportBpfLsmAndTrampolines) {
  FLVM_REQUIRE_PROBE("bpf_lsm");
  auto r = run({bin("faultctl"), "features"});
  EXPECT_EQ(r.status.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nbpf_lsm\s+yes)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nfentry\s+yes)"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(any-syscall errno\s+(uses:\s+)?BPF LSM)"))) << r.out;
}

}  // namespace
}  // namespace flvm
