// Loss models measured over 100000 runs each: the rate, and for correlated and
// Gilbert-Elliott loss the burst lengths. All runs of a test stay on one CPU
// (the fixture pins it), so they share one CPU's decision memory in fl_loss_state.
#include <bpf/bpf.h>

#include <cstring>

#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

constexpr int kRuns = 100000;

struct LossRun {
  std::vector<bool> dropped;  // one decision per run, in order
  double rate = 0;            // fraction dropped
  double mean_burst = 0;      // mean length of runs of consecutive drops
  size_t bursts = 0;
};

class LossStatisticsTest : public NetfaultTest {
 protected:
  // Sends kRuns packets to the fault's target and records each verdict.
  LossRun measure(uint32_t slot) {
    Packet pkt = udp_to("192.0.2.1");
    std::vector<uint8_t> out(pkt.bytes.size() + 64);
    LossRun lr;
    lr.dropped.reserve(kRuns);
    for (int i = 0; i < kRuns; ++i) {
      LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt.bytes.data(), .data_out = out.data(),
                  .data_size_in = static_cast<__u32>(pkt.bytes.size()), .data_size_out = static_cast<__u32>(out.size()),
                  .repeat = 1);
      int err = bpf_prog_test_run_opts(egress_fd(), &o);
      if (err != 0) {
        ADD_FAILURE() << "run " << i << " failed: " << std::strerror(-err);
        return lr;
      }
      auto v = static_cast<Verdict>(static_cast<int32_t>(o.retval));
      if (v != Verdict::Pass && v != Verdict::Redirect) {
        ADD_FAILURE() << "run " << i << ": a loss fault returned " << ::testing::PrintToString(v);
        return lr;
      }
      lr.dropped.push_back(v == Verdict::Redirect);
    }
    size_t drops = 0, burst_total = 0;
    for (size_t i = 0; i < lr.dropped.size(); ++i) {
      if (!lr.dropped[i]) continue;
      ++drops;
      ++burst_total;
      if (i == 0 || !lr.dropped[i - 1]) ++lr.bursts;
    }
    lr.rate = static_cast<double>(drops) / kRuns;
    lr.mean_burst = lr.bursts != 0 ? static_cast<double>(burst_total) / static_cast<double>(lr.bursts) : 0;
    fl_fault_stats st = stats(slot);
    EXPECT_EQ(st.matched, static_cast<uint64_t>(kRuns)) << "every run matched the fault";
    EXPECT_EQ(st.dropped, drops) << "the dropped counter agrees with the verdicts seen";
    EXPECT_EQ(reason(FL_DROP_LOSS), drops);
    return lr;
  }
};

TEST_F(LossStatisticsTest, UniformThirtyPercentLossIsThirtyPercent) {
  FaultSpec s = make_spec(FaultKind::Loss, {"192.0.2.1"});
  s.percent = 30;
  LossRun lr = measure(add(s));
  EXPECT_NEAR(lr.rate * 100, 30.0, 1.0) << "loss rate over " << kRuns << " runs, in percent";
  // Independent draws: bursts are geometric with mean 1/(1-p).
  EXPECT_NEAR(lr.mean_burst, 1 / 0.7, 0.1 / 0.7) << "mean burst of uncorrelated 30% loss";
}

TEST_F(LossStatisticsTest, CorrelationKeepsTheRateAndLengthensBursts) {
  const double p = 0.30, c = 0.60;
  FaultSpec s = make_spec(FaultKind::Loss, {"192.0.2.1"});
  s.percent = p * 100;
  s.correlation = c * 100;
  LossRun lr = measure(add(s));
  EXPECT_NEAR(lr.rate * 100, p * 100, 1.5) << "correlation must not move the mean loss";
  const double want = 1 / ((1 - c) * (1 - p));  // 3.57 packets
  EXPECT_NEAR(lr.mean_burst, want, want * 0.10) << "mean burst = 1/((1-c)(1-p)) over " << lr.bursts << " bursts";
}

TEST_F(LossStatisticsTest, GilbertElliottBurstsLastOneOverRAndLossIsPOverPPlusR) {
  const double p = 0.05, r = 0.25;
  FaultSpec s = make_spec(FaultKind::Loss, {"192.0.2.1"});
  s.ge = GeModel{.p = p * 100, .r = r * 100, .loss_bad = 100, .loss_good = 0};
  LossRun lr = measure(add(s));
  EXPECT_NEAR(lr.rate * 100, p / (p + r) * 100, 1.5) << "stationary share of the bad state, in percent";
  EXPECT_NEAR(lr.mean_burst, 1 / r, 0.10 / r) << "mean stay in the bad state over " << lr.bursts << " bursts";
}

}  // namespace
}  // namespace faultline::bpftest
