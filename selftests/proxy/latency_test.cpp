// latency: the delay added to a request/response through the proxy, measured
// against the same path without the toxic, within 5% of what was asked.
#include <gtest/gtest.h>

#include <algorithm>

#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

double median_rtt_ms(int fd, int rounds) {
  std::vector<double> v;
  for (int i = 0; i < rounds; ++i) v.push_back(fltest::round_trip_ms(fd));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void expect_added_latency(int64_t latency_ms, const char* stream) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  double base = median_rtt_ms(c.get(), 20);
  ASSERT_TRUE(p.registry
                  ->add_toxic("p", fltest::toxic(R"({"type":"latency","stream":")" + std::string(stream) +
                                                 R"(","attributes":{"latency":)" + std::to_string(latency_ms) + "}}"))
                  .ok());
  double with = median_rtt_ms(c.get(), latency_ms >= 200 ? 5 : 10);
  double added = with - base;
  std::printf("latency %s %lld ms: added %.2f ms (%.2f%%), base round trip %.3f ms\n", stream, (long long)latency_ms,
              added, 100.0 * (added - double(latency_ms)) / double(latency_ms), base);
  EXPECT_NEAR(added, double(latency_ms), 0.05 * double(latency_ms));
}

TEST(LatencyToxic, AddsFiftyMillisecondsDownstream) { expect_added_latency(50, "downstream"); }
TEST(LatencyToxic, AddsTwoHundredMillisecondsDownstream) { expect_added_latency(200, "downstream"); }
TEST(LatencyToxic, AddsFiftyMillisecondsUpstream) { expect_added_latency(50, "upstream"); }
TEST(LatencyToxic, AddsTwoHundredMillisecondsUpstream) { expect_added_latency(200, "upstream"); }

TEST(LatencyToxic, JitterStaysWithinItsBounds) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(
      p.registry->add_toxic("p", fltest::toxic(R"({"type":"latency","attributes":{"latency":60,"jitter":20}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  double lo = 1e9, hi = 0;
  for (int i = 0; i < 20; ++i) {
    double ms = fltest::round_trip_ms(c.get());
    lo = std::min(lo, ms);
    hi = std::max(hi, ms);
  }
  std::printf("latency 60 ms jitter 20 ms: round trips from %.2f to %.2f ms\n", lo, hi);
  EXPECT_GE(lo, 40.0 - 0.5);
  EXPECT_LE(hi, 80.0 + 5.0);
  EXPECT_GT(hi - lo, 5.0) << "20 round trips with 20 ms of jitter all took the same time";
}

}  // namespace

namespace {

// Each chunk waits from its own arrival, and a direction reads ahead while the
// first waits: a megabyte under 50 ms moves at several buffers per delay.
TEST(LatencyToxic, ABulkTransferIsNotOneBufferPerDelay) {
  const size_t total = 1'000'000;
  fltest::ScriptServer server([&](UniqueFd fd) { fltest::send_all(fd.get(), fltest::pattern(total, 9)); });
  auto p = fltest::start_proxy(server.port(), faultline::ReceiveMode::buffer_ring);
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"latency","attributes":{"latency":50}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  auto first = fltest::read_exact(c.get(), 1);
  auto end = fltest::read_to_end(c.get());
  ASSERT_EQ(first + end.data, fltest::pattern(total, 9));
  // One 16 KiB buffer per 50 ms would take 3 s.
  std::printf("latency 50 ms, 1 MB downstream: %.3f s after the first byte\n", end.seconds);
  EXPECT_LT(end.seconds, 1.5);
}

}  // namespace
