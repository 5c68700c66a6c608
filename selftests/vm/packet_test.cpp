// Packet faults between two namespaces on a veth pair. Packet.* runs on every
// attach path the guest's kernel offers: once with `--attach tcx` (a TCX link,
// 6.6+) and once with `--attach tc` (tc clsact + cls_bpf); a path the probe says
// the kernel lacks is reported not applicable, with the probe's reason. Loss and
// partition must look like the network. Edt.* (latency, jitter, rate through EDT
// on sch_fq, which faultctl installs and removes again; not applicable without
// fq) runs on the path faultctl chooses by itself, the best one the kernel has:
// the timestamp the program sets is the same on both paths, and the two timed
// passes would cost a kernel's boot a minute and a half under emulation.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "selftests/lib/netns_pair.h"
#include "vm_util.h"

namespace flvm {
namespace {

const std::string kNsA = "fl-vm-a", kNsB = "fl-vm-b";  // NetnsPair "fl-vm"
const std::string kAddrA = "198.18.0.1", kAddrB = "198.18.0.2";

double mono_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The probe behind each attach path.
std::string probe_of(const std::string& attach) { return attach == "tcx" ? "tcx" : "clsact"; }

class PacketBase : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    net_ = std::make_unique<fltest::NetnsPair>("fl-vm", fltest::VethEnd{"va", {kAddrA + "/24"}},
                                               fltest::VethEnd{"vb", {kAddrB + "/24"}});
  }
  static void TearDownTestSuite() { net_.reset(); }
  // The attach path under test: "tcx", "tc", or "" for faultctl's own choice.
  virtual std::string attach() const = 0;
  // The path faultctl will use: the one asked for, else the best the probes allow.
  std::string expected_attach() const {
    if (!attach().empty()) return attach();
    return probe_available("tcx") ? "tcx" : "tc";
  }
  void SetUp() override {
    FLVM_REQUIRE_PROBE(probe_of(expected_attach()));
    root_qdisc_before_ = root_qdisc();
    auto warm = ping(kNsA, kAddrB, 3, "0.2");
    ASSERT_EQ(warm.received, 3) << "no path between the namespaces: " << warm.raw;
  }
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_EQ(root_qdisc(), root_qdisc_before_) << "the device's root qdisc must be restored";
    EXPECT_EQ(qdiscs().find("clsact"), std::string::npos) << "clsact must be removed: " << qdiscs();
  }

  static std::string qdiscs() { return run({"tc", "-n", kNsA, "qdisc", "show", "dev", "va"}).out; }
  static std::string root_qdisc() {
    std::istringstream in(qdiscs());
    for (std::string line; std::getline(in, line);) {
      if (line.find(" root ") != std::string::npos) return line;
    }
    return "";
  }

  // `faultctl run KIND --netns a --target b [--attach PATH] --json ARGS`, once
  // started: its "started" event must name the attach path expected.
  ChildProcess start_run(const std::string& kind, const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {bin("faultctl"), "run", kind, "--netns", kNsA, "--target", kAddrB, "--json"};
    if (!attach().empty()) argv.insert(argv.end(), {"--attach", attach()});
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess b = start(argv);
    EXPECT_TRUE(b.wait_for("\"started\"", 30s)) << b.out();
    const std::string want = expected_attach();
    EXPECT_NE(b.out().find("\"attach\":\"" + want + "\""), std::string::npos)
        << "the fault must say it is attached with " << want << ": " << b.out();
    if (want == "tcx") {
      EXPECT_EQ(qdiscs().find("clsact"), std::string::npos) << "a TCX attach needs no clsact: " << qdiscs();
    } else {
      EXPECT_NE(qdiscs().find("clsact"), std::string::npos) << qdiscs();
    }
    return b;
  }
  // EDT faults need sch_fq: not applicable without it.
  static bool edt_missing() { return !probe_available("sch_fq"); }
#define FLVM_REQUIRE_EDT()                                                                                   \
  do {                                                                                                       \
    if (edt_missing()) FLVM_NOT_APPLICABLE("delay, jitter and rate need sch_fq: " + probe_detail("sch_fq")); \
  } while (0)
  // Ends a run early (SIGTERM: the fault ends, faultctl exits 1) and waits for it.
  static void stop(ChildProcess& b) {
    b.signal(SIGTERM);
    auto code = b.wait(30s);
    EXPECT_TRUE(code.has_value()) << b.out();
  }

  static inline std::unique_ptr<fltest::NetnsPair> net_;  // kNsA and kNsB
  std::string root_qdisc_before_;
};

class Packet : public PacketBase, public ::testing::WithParamInterface<std::string> {
 protected:
  std::string attach() const override { return GetParam(); }
};

class Edt : public PacketBase {
 protected:
  std::string attach() const override { return ""; }
};

TEST_P(Packet, PartitionDropsEverythingSilentlyAndHeals) {
  auto f = start_run("partition", {"--duration", "30s"});
  auto p = ping(kNsA, kAddrB, 10, "0.1");
  EXPECT_EQ(p.sent, 10) << p.raw;
  EXPECT_EQ(p.received, 0) << p.raw;
  auto udp = run_in(kNsA, {bin("fl-vmprobe"), "udp-send", kAddrB, "9000", "200", "1000"});
  EXPECT_NE(udp.out.find("errors 0"), std::string::npos) << "a partition must be silent to the sender: " << udp.out;
  stop(f);
  auto after = ping(kNsA, kAddrB, 5, "0.1");
  EXPECT_EQ(after.received, 5) << after.raw;
}

TEST_P(Packet, LossDropsTheRequestedShare) {
  ChildProcess sink = start({"nsenter", "--net=/run/netns/" + kNsB, bin("fl-vmprobe"), "udp-sink", "9000", "3"});
  ASSERT_TRUE(sink.wait_for("ready", 10s)) << sink.out();
  auto f = start_run("loss", {"--percent", "30", "--duration", "60s"});
  auto udp = run_in(kNsA, {bin("fl-vmprobe"), "udp-send", kAddrB, "9000", "3000", "1000"});
  auto p = ping(kNsA, kAddrB, 200, "0.01");
  stop(f);
  ASSERT_TRUE(sink.wait(20s).has_value()) << sink.out();
  EXPECT_NE(udp.out.find("errors 0"), std::string::npos) << "loss must be silent to the sender: " << udp.out;
  long received = -1;
  std::sscanf(sink.out().c_str() + sink.out().find("received"), "received %ld", &received);
  const double udp_loss = 100.0 * (1.0 - received / 3000.0);
  // Binomial sd at 30% of 3000 is 0.84 points: 3.5 points is four sd.
  EXPECT_NEAR(udp_loss, 30, 3.5) << sink.out();
  EXPECT_NEAR(p.loss(), 30, 12) << p.raw;
  std::printf("vmtest-figure: loss 30%% on %s: UDP %.1f%% of 3000, ICMP %.1f%% of %d\n", expected_attach().c_str(),
              udp_loss, p.loss(), p.sent);
}

// How late this (emulated) machine's timers fire: the mean overshoot of 20 sleeps
// of 50 ms. fq releases a delayed packet from an hrtimer too, so the same lateness
// lands on every delayed packet; it depends on the host's load, not on Faultline.
double timer_lateness_ms() {
  std::vector<double> late;
  for (int i = 0; i < 20; ++i) {
    const double t0 = mono_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    late.push_back((mono_s() - t0) * 1000 - 50);
  }
  return mean(late);
}

// Mean RTT under the fault minus the mean without it.
TEST_F(Edt, LatencyAddsTheRequestedDelay) {
  FLVM_REQUIRE_EDT();
  auto base = ping(kNsA, kAddrB, 30, "0.05");
  ASSERT_EQ(base.received, 30) << base.raw;
  auto f = start_run("latency", {"--delay", "50ms", "--duration", "60s"});
  EXPECT_NE(root_qdisc().find("qdisc fq"), std::string::npos)
      << "fq must be the root qdisc during the fault: " << qdiscs();
  auto p = ping(kNsA, kAddrB, 50, "0.1");
  stop(f);
  ASSERT_EQ(p.received, 50) << p.raw;
  const double added = mean(p.rtt_ms) - mean(base.rtt_ms);
  const double added_median = percentile(p.rtt_ms, 50) - percentile(base.rtt_ms, 50);
  const double late = timer_lateness_ms();
  // Under TCG on a busy host the emulated machine's timers fire late, which only
  // ever adds delay. The mean added RTT less that lateness must be within 5% of the
  // request; the raw mean within 15%.
  EXPECT_NEAR(added - late, 50, 2.5) << "requested 50 ms; timers " << late << " ms late; base RTT " << mean(base.rtt_ms)
                                     << " ms; " << p.raw;
  EXPECT_NEAR(added, 50, 7.5) << "requested 50 ms; base RTT " << mean(base.rtt_ms) << " ms; " << p.raw;
  std::printf(
      "vmtest-figure: latency --delay 50ms on %s+fq: mean added RTT %.2f ms (%+.1f%%), median %.2f ms, "
      "guest timers %.2f ms late, base %.3f ms, n=%zu\n",
      expected_attach().c_str(), added, 2 * (added - 50), added_median, late, mean(base.rtt_ms), p.rtt_ms.size());
}

TEST_F(Edt, NormalJitterHasTheRequestedSpread) {
  FLVM_REQUIRE_EDT();
  auto base = ping(kNsA, kAddrB, 20, "0.05");
  auto f =
      start_run("latency", {"--delay", "50ms", "--jitter", "10ms", "--distribution", "normal", "--duration", "60s"});
  auto p = ping(kNsA, kAddrB, 120, "0.1");
  stop(f);
  ASSERT_GE(p.received, 115) << p.raw;
  const double m = mean(p.rtt_ms) - mean(base.rtt_ms), sd = stddev(p.rtt_ms);
  const double med = percentile(p.rtt_ms, 50) - percentile(base.rtt_ms, 50);
  // sigma from the interquartile range (IQR / 1.349 for a normal distribution):
  // late timers on a busy emulated host (see the latency test) inflate sd, not this.
  const double sigma = (percentile(p.rtt_ms, 75) - percentile(p.rtt_ms, 25)) / 1.349;
  // 120 samples: the IQR estimate is within about 11% of sigma (one se); 25% is more than two.
  EXPECT_NEAR(sigma, 10, 2.5) << "sigma of the added delay; sd " << sd;
  EXPECT_NEAR(med, 50, 4 + timer_lateness_ms()) << "median of the added delay; mean " << m;
  std::printf(
      "vmtest-figure: jitter normal 50ms+-10ms on %s: mean %.2f ms, median %.2f ms, sd %.2f ms, IQR sigma %.2f ms, "
      "n=%zu\n",
      expected_attach().c_str(), m, med, sd, sigma, p.rtt_ms.size());
}

TEST_F(Edt, UniformJitterStaysWithinTheRange) {
  FLVM_REQUIRE_EDT();
  auto base = ping(kNsA, kAddrB, 20, "0.05");
  const double b = mean(base.rtt_ms);
  auto f =
      start_run("latency", {"--delay", "50ms", "--jitter", "10ms", "--distribution", "uniform", "--duration", "60s"});
  auto p = ping(kNsA, kAddrB, 100, "0.1");
  stop(f);
  ASSERT_GE(p.received, 95) << p.raw;
  std::vector<double> added;
  for (double r : p.rtt_ms) added.push_back(r - b);
  std::sort(added.begin(), added.end());
  const double lo = added.front(), hi = added.back();
  const double p95 = added[added.size() * 95 / 100];
  const double sd = stddev(p.rtt_ms);
  // EDT never sends early, so the low end is hard; a late timer (TCG, a loaded
  // host) can only push a sample up, so the high end is checked at the 95th percentile.
  EXPECT_GE(lo, 39) << "uniform 50 +- 10 ms never goes below 40 ms";
  const double late = timer_lateness_ms();
  EXPECT_LE(p95, 62 + late) << "uniform 50 +- 10 ms stays below 60 ms (plus timers " << late << " ms late); max " << hi;
  EXPECT_LE(lo, 44) << "the low end of the range must be reached";
  EXPECT_GE(p95, 55) << "the high end of the range must be reached";
  // sd from the interquartile range (IQR / sqrt(3) for a uniform distribution), like
  // the normal-jitter test: a few late timers on a loaded host inflate the plain sd
  // (7-8.4 ms seen with one sample at +97 ms), not this.
  const double sd_iqr = (percentile(added, 75) - percentile(added, 25)) / std::sqrt(3.0);
  // The quartiles of ~100 samples move about 1 ms each by chance alone, and TCG's
  // late timers push the upper one further: 2 ms (the IQR within 3.5 ms) holds a
  // correct jitter; none (0) or a doubled range (11.5) still fail.
  EXPECT_NEAR(sd_iqr, 10 / std::sqrt(3.0), 2.0) << "sd of uniform(-10, 10) is 5.77 ms; plain sd " << sd;
  std::printf(
      "vmtest-figure: jitter uniform 50ms+-10ms on %s: added %.1f..%.1f ms, sd %.2f ms, IQR sd %.2f ms, n=%zu\n",
      expected_attach().c_str(), lo, hi, sd, sd_iqr, p.rtt_ms.size());
}

uint64_t rx_bytes_b() {
  auto r = run({"ip", "-n", kNsB, "-s", "-j", "link", "show", "dev", "vb"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_array() || j.empty()) return 0;
  return j[0]["stats64"]["rx"]["bytes"].get<uint64_t>();
}

// Bytes on the wire (what the veth peer receives, headers included, as EDT counts
// them) over a window in steady state, with TCP pushing as hard as it can.
TEST_F(Edt, RateLimitHolds) {
  FLVM_REQUIRE_EDT();
  ChildProcess sink = start({"nsenter", "--net=/run/netns/" + kNsB, bin("fl-vmprobe"), "tcp-sink", "9001"});
  ASSERT_TRUE(sink.wait_for("ready", 10s)) << sink.out();
  auto f = start_run("bandwidth", {"--rate", "10mbit", "--duration", "60s"});
  ChildProcess sender =
      start({"nsenter", "--net=/run/netns/" + kNsA, bin("fl-vmprobe"), "tcp-send", kAddrB, "9001", "9"});
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const uint64_t b0 = rx_bytes_b();
  const double t0 = mono_s();
  std::this_thread::sleep_for(std::chrono::seconds(5));
  const uint64_t b1 = rx_bytes_b();
  const double t1 = mono_s();
  ASSERT_TRUE(sender.wait(30s).has_value()) << sender.out();
  stop(f);
  (void)sink.wait(10s);
  const double mbit = static_cast<double>(b1 - b0) * 8 / (t1 - t0) / 1e6;
  EXPECT_NEAR(mbit, 10, 0.5) << "bytes " << b0 << " -> " << b1 << " in " << (t1 - t0) << " s";
  std::printf("vmtest-figure: bandwidth --rate 10mbit on %s+fq: %.3f Mbit/s on the wire (%+.1f%%)\n",
              expected_attach().c_str(), mbit, 10 * (mbit - 10));
}

INSTANTIATE_TEST_SUITE_P(Attach, Packet, ::testing::Values(std::string("tcx"), std::string("tc")),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace flvm
