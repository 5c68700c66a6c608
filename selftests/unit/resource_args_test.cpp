// faultctl run process|cpu|memory|disk flag parsing, specs and the disk arithmetic.
#include "ctl/resource_args.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <variant>

#include "base/cgroup.h"
#include "parse_words.h"
#include "userspace/faults/resource/fault.h"
#include "userspace/faults/resource/spec.h"

namespace faultline {
namespace {

TEST(ResourceArgs, ProcessFreezeByPid) {
  auto r = args_of(parse_resource_args(split("process --pid 1234 --action freeze --duration 30s")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec.kind, ResourceKind::Process);
  EXPECT_EQ(r->spec.pid, 1234);
  EXPECT_EQ(r->spec.action, ProcessAction::Freeze);
  EXPECT_EQ(r->spec.duration_ns, 30'000'000'000ULL);
}

TEST(ResourceArgs, ProcessKillWithSignalNames) {
  for (const char* sig : {"TERM", "SIGTERM", "term", "15"}) {
    auto r = args_of(parse_resource_args(
        split(std::string("process --name nginx --action kill --signal ") + sig + " --duration 10s")));
    ASSERT_TRUE(r.ok()) << sig << ": " << r.error().message;
    EXPECT_EQ(r->spec.signal, SIGTERM) << sig;
  }
  auto d = args_of(parse_resource_args(split("process --name nginx --action kill --duration 10s")));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->spec.signal, SIGKILL) << "the default signal of --action kill";
}

TEST(ResourceArgs, CpuMemoryDisk) {
  auto c = args_of(parse_resource_args(split("cpu --cores 2 --load 50% --duration 1m")));
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->spec.cores, 2u);
  EXPECT_DOUBLE_EQ(c->spec.load, 50);
  auto m = args_of(parse_resource_args(split("memory --size 512MiB --duration 1m")));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->spec.size_bytes, 512ULL << 20);
  auto d = args_of(parse_resource_args(split("disk --path /var/tmp --fill 95% --min-free 1GiB --duration 5m")));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_DOUBLE_EQ(*d->spec.fill_percent, 95);
  EXPECT_EQ(d->spec.min_free_bytes, 1ULL << 30);
  auto s = args_of(parse_resource_args(split("disk --path /var/tmp --size 2GB --duration 5m --dry-run --json")));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->spec.size_bytes, 2'000'000'000ULL);
  EXPECT_TRUE(s->flags.dry_run);
  EXPECT_TRUE(s->flags.json);
}

TEST(ResourceArgs, RecordFlags) {
  auto r = args_of(
      parse_resource_args({"cpu", "--cores", "1", "--duration", "10s", "--health-url", "http://127.0.0.1:8080/health",
                           "--hypothesis", "checkout p99 stays under 300ms", "--steady-state", "5s", "--record",
                           "/tmp/faultline-unit-record-does-not-exist", "--slo", "p99<300ms"}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->flags.record.has_value());
  EXPECT_EQ(r->flags.record->hypothesis, "checkout p99 stays under 300ms");
  EXPECT_EQ(r->flags.record->steady_state_ns, 5'000'000'000ULL);
  ASSERT_TRUE(r->flags.record->slo.has_value());
  EXPECT_DOUBLE_EQ(r->flags.record->slo->threshold, 300);
  EXPECT_NE(r->flags.record->command_line.find("'checkout p99 stays under 300ms'"), std::string::npos)
      << r->flags.record->command_line;
  auto def =
      args_of(parse_resource_args({"cpu", "--cores", "1", "--duration", "10s", "--health-url", "http://127.0.0.1/",
                                   "--hypothesis", "x", "--record", "/tmp/faultline-unit-record-does-not-exist"}));
  ASSERT_TRUE(def.ok()) << def.error().message;
  EXPECT_EQ(def->flags.record->steady_state_ns, 30'000'000'000ULL)
      << "--record measures 30s of steady state by default";
}

struct BadInput {
  std::vector<std::string> args;
  std::string flag;  // the error must name it
};

// Every bad input is refused with one line that names the flag at fault.
TEST(ResourceArgs, BadInputsNameTheirFlag) {
  const BadInput cases[] = {
      {split("cpu --cores 1"), "--duration"},
      {split("cpu --cores 1 --duration 2h"), "--duration"},
      {split("cpu --cores 1 --duration 10"), "--duration"},
      {split("cpu --cores 1 --duration 500ms"), "--duration"},
      {split("cpu --duration 10s"), "--cores"},
      {split("cpu --cores 0 --duration 10s"), "--cores"},
      {split("cpu --cores two --duration 10s"), "--cores"},
      {split("cpu --cores 1 --load 0 --duration 10s"), "--load"},
      {split("cpu --cores 1 --load 120 --duration 10s"), "--load"},
      {split("cpu --cores 1 --size 1MB --duration 10s"), "--size"},
      {split("memory --duration 10s"), "--size"},
      {split("memory --size 12XB --duration 10s"), "--size"},
      {split("memory --size 100KiB --duration 10s"), "--size"},
      {split("memory --size 64MiB --path /tmp --duration 10s"), "--path"},
      {split("disk --fill 50% --duration 10s"), "--path"},
      {split("disk --path /tmp --duration 10s"), "--fill"},
      {split("disk --path /tmp --fill 100% --duration 10s"), "--fill"},
      {split("disk --path /tmp --fill 0 --duration 10s"), "--fill"},
      {split("disk --path /tmp --fill 101% --duration 10s"), "--fill"},
      {split("disk --path /tmp --fill 50% --size 1GB --duration 10s"), "--fill"},
      {split("disk --path /tmp --fill 50% --min-free 10KiB --duration 10s"), "--min-free"},
      {split("disk --path /tmp --fill 50% --cores 1 --duration 10s"), "--cores"},
      {split("process --action freeze --duration 10s"), "--pid"},
      {split("process --pid 12 --name x --action freeze --duration 10s"), "--pid"},
      {split("process --pid 0 --action freeze --duration 10s"), "--pid"},
      {split("process --pid -3 --action freeze --duration 10s"), "--pid"},
      {split("process --pid 12 --duration 10s"), "--action"},
      {split("process --pid 12 --action explode --duration 10s"), "--action"},
      {split("process --pid 12 --action freeze --signal TERM --duration 10s"), "--signal"},
      {split("process --pid 12 --action kill --signal FOO --duration 10s"), "--signal"},
      {split("process --pid 12 --action kill --signal STOP --duration 10s"), "--signal"},
      {split("process --pid 12 --action kill --load 5 --duration 10s"), "--load"},
      {split("cpu --cores 1 --duration 10s --health-url ftp://x/"), "--health-url"},
      {split("cpu --cores 1 --duration 10s --interval 1s"), "--interval"},
      {split("cpu --cores 1 --duration 10s --abort-above 5"), "--abort-above"},
      {split("cpu --cores 1 --duration 10s --kernel-signal cpu_melt --abort-above 1"), "--kernel-signal"},
      {split("cpu --cores 1 --duration 10s --hypothesis x"), "--hypothesis"},
      {split("cpu --cores 1 --duration 10s --slo p99<1s"), "--slo"},
      {split("cpu --cores 1 --duration 10s --record /tmp/x-new"), "--record"},
      {split("cpu --cores 1 --duration 10s --record /tmp/x-new --hypothesis h"), "--record"},
      {split("cpu --cores 1 --duration 10s --steady-state 5s"), "--steady-state"},
      {split("cpu --cores 1 --duration 10s --health-url http://h/ --steady-state 0s"), "--steady-state"},
      {split("cpu --cores 1 --duration 10s --health-url http://h/ --steady-state 1h"), "--steady-state"},
      {split("cpu --cores 1 --duration 10s --health-url http://h/ --record /tmp/x-new --hypothesis h --slo p99>1s"),
       "--slo"},
      {split(
           "cpu --cores 1 --duration 10s --health-url http://h/ --record /tmp/x-new --hypothesis h --slo success>101%"),
       "--slo"},
      {split("cpu --cores 1 --duration 1s --health-url http://h/ --record /tmp/x-new --hypothesis h"), "--duration"},
      {split("cpu --cores 1 --duration 10s --health-url http://h/ --record /nonexistent-dir/rec --hypothesis h"),
       "--record"},
      {split("cpu --cores 1 --duration 10s --health-url http://h/ --record /etc --hypothesis h"), "--record"},
      {split("cpu --cores 1 --duration 10s --bogus"), "bogus"},
  };
  for (const auto& c : cases) {
    std::string line;
    for (const auto& a : c.args) line += a + " ";
    auto r = args_of(parse_resource_args(c.args));
    ASSERT_FALSE(r.ok()) << "accepted: " << line;
    EXPECT_NE(r.error().err, 0) << line;
    EXPECT_NE(r.error().message.find(c.flag), std::string::npos)
        << "for: " << line << "\n expected the error to name " << c.flag << "\n got: " << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << "one line: " << r.error().message;
  }
}

TEST(ResourceArgs, HelpIsAnAnswerNotAnError) {
  for (const char* line : {"cpu --help", "disk -h", "memory --size 1x --help"}) {
    auto r = parse_resource_args(split(line));
    ASSERT_TRUE(r.ok()) << line << ": " << r.error().message;
    const auto* help = std::get_if<HelpText>(&*r);
    ASSERT_NE(help, nullptr) << line;
    EXPECT_NE(help->text.find("--cores"), std::string::npos) << help->text;
  }
}

TEST(ResourceSpec, SignalsAndSizes) {
  EXPECT_EQ(*parse_signal("usr1"), SIGUSR1);
  EXPECT_EQ(*parse_signal("9"), SIGKILL);
  EXPECT_FALSE(parse_signal("0").ok());
  EXPECT_FALSE(parse_signal("SIGTSTP").ok());
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(format_bytes(512ULL << 20), "512MiB");
  EXPECT_EQ(format_bytes(1536ULL << 20), "1.5GiB");
  EXPECT_EQ(format_bytes(100), "100B");
}

TEST(ResourceSpec, SummaryAndJson) {
  ResourceSpec s;
  s.kind = ResourceKind::Disk;
  s.path = "/data";
  s.fill_percent = 90;
  s.duration_ns = 60'000'000'000ULL;
  EXPECT_EQ(s.summary(), "disk /data to 90% full");
  auto j = s.to_json();
  EXPECT_EQ(j["kind"], "disk");
  EXPECT_EQ(j["duration"], "1m");
  EXPECT_DOUBLE_EQ(j["fill_percent"].get<double>(), 90);
}

// df's arithmetic: use% = used / (used + available).
TEST(DiskFill, BalloonReachesTheFillLevel) {
  FsUsage fs;
  fs.block = 4096;
  fs.used = 40ULL << 20;
  fs.available = 60ULL << 20;
  ResourceSpec s;
  s.kind = ResourceKind::Disk;
  s.path = "/x";
  s.fill_percent = 90;
  s.min_free_bytes = 1ULL << 20;
  auto b = balloon_bytes(s, fs);
  ASSERT_TRUE(b.ok()) << b.error().message;
  FsUsage after = fs;
  after.used += *b;
  after.available -= *b;
  EXPECT_NEAR(after.use_percent(), 90.0, 0.01);
  EXPECT_EQ(*b % 4096, 0u) << "whole blocks";
}

TEST(DiskFill, FloorAndAlreadyFullAreRefused) {
  FsUsage fs{4096, 40ULL << 20, 60ULL << 20};
  ResourceSpec s;
  s.kind = ResourceKind::Disk;
  s.path = "/x";
  s.fill_percent = 99;
  s.min_free_bytes = 8ULL << 20;  // 99% of 100MiB leaves 1MiB: under the floor
  auto floor = balloon_bytes(s, fs);
  ASSERT_FALSE(floor.ok());
  EXPECT_NE(floor.error().message.find("--min-free"), std::string::npos) << floor.error().message;
  s.fill_percent = 30;  // already 40% full
  auto full = balloon_bytes(s, fs);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find("already 40.0% full"), std::string::npos) << full.error().message;
  s.fill_percent.reset();
  s.size_bytes = 70ULL << 20;  // more than is free
  auto big = balloon_bytes(s, fs);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("--size"), std::string::npos) << big.error().message;
}

TEST(Cgroups, HybridMountinfo) {
  const std::string mi =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
      "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
      "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw,nsdelegate\n"
      "50 23 0:40 / /mnt/with\\040space rw - cgroup2 cgroup2 rw\n";
  CgroupMounts m = parse_cgroup_mounts(mi);
  EXPECT_EQ(m.v2, "/sys/fs/cgroup/unified") << "the first cgroup2 mount wins";
  EXPECT_EQ(m.v1.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(m.v1.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_FALSE(m.v1.contains("name=systemd"));
  EXPECT_FALSE(m.v1.contains("rw"));
  CgroupMounts only = parse_cgroup_mounts("50 23 0:40 / /mnt/with\\040space rw - cgroup2 cgroup2 rw\n");
  EXPECT_EQ(only.v2, "/mnt/with space");
}

// Planning touches nothing, and what it refuses is refused with the flag named.
TEST(ProcessFault, PlanRefusesDangerousTargets) {
  ResourceSpec s;
  s.kind = ResourceKind::Process;
  s.action = ProcessAction::Freeze;
  s.duration_ns = 10'000'000'000ULL;
  s.pid = 1;
  auto pid1 = plan_resource_fault(s);
  ASSERT_FALSE(pid1.ok());
  EXPECT_NE(pid1.error().message.find("PID 1"), std::string::npos) << pid1.error().message;
  s.pid = ::getpid();
  auto self = plan_resource_fault(s);
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.error().message.find("faultctl itself"), std::string::npos) << self.error().message;
  s.pid = ::getppid();
  auto parent = plan_resource_fault(s);
  ASSERT_FALSE(parent.ok());
  EXPECT_NE(parent.error().message.find("ancestor"), std::string::npos) << parent.error().message;
  s.pid = 2;  // kthreadd
  auto kt = plan_resource_fault(s);
  ASSERT_FALSE(kt.ok());
  EXPECT_NE(kt.error().message.find("kernel thread"), std::string::npos) << kt.error().message;
  s.pid.reset();
  s.name = "no-such-process-[0-9]{9}";
  auto none = plan_resource_fault(s);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--name"), std::string::npos) << none.error().message;
  s.name = "([";
  auto bad_re = plan_resource_fault(s);
  ASSERT_FALSE(bad_re.ok());
  EXPECT_NE(bad_re.error().message.find("regular expression"), std::string::npos) << bad_re.error().message;
}

}  // namespace
}  // namespace faultline
