// bandwidth: a stream through the proxy at the asked rate (KB/s, KB = 1000 bytes)
// within 5%, measured from the connection to the last byte.
#include <gtest/gtest.h>

#include <future>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

TEST(BandwidthToxic, DownstreamRateWithinFivePercent) {
  const size_t total = 1'000'000;
  fltest::ScriptServer server([&](UniqueFd fd) { fltest::send_all(fd.get(), fltest::pattern(total, 3)); });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"bandwidth","attributes":{"rate":500}})")).ok());
  uint64_t start = fltest::monotonic_ns();
  UniqueFd c = fltest::connect_loopback(p.port);
  auto end = fltest::read_to_end(c.get());
  double seconds = double(fltest::monotonic_ns() - start) / 1e9;
  ASSERT_EQ(end.data, fltest::pattern(total, 3));
  double rate_kbps = double(total) / 1000.0 / seconds;
  std::printf("bandwidth downstream 500 KB/s: %.1f KB/s over %.3f s (%.2f%%)\n", rate_kbps, seconds,
              100.0 * (rate_kbps - 500.0) / 500.0);
  EXPECT_NEAR(rate_kbps, 500.0, 25.0);
}

TEST(BandwidthToxic, UpstreamRateWithinFivePercent) {
  const size_t total = 2'000'000;
  std::promise<double> took;
  fltest::ScriptServer server([&](UniqueFd fd) {
    uint64_t start = fltest::monotonic_ns();
    auto in = fltest::read_to_end(fd.get());
    took.set_value(in.data.size() == total ? double(fltest::monotonic_ns() - start) / 1e9 : -1.0);
  });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(
      p.registry
          ->add_toxic("p", fltest::toxic(R"({"type":"bandwidth","stream":"upstream","attributes":{"rate":1000}})"))
          .ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  fltest::send_all(c.get(), fltest::pattern(total, 4));
  ::shutdown(c.get(), SHUT_WR);
  double seconds = took.get_future().get();
  ASSERT_GT(seconds, 0) << "the server did not get the 2 MB intact";
  double rate_kbps = double(total) / 1000.0 / seconds;
  std::printf("bandwidth upstream 1000 KB/s: %.1f KB/s over %.3f s (%.2f%%)\n", rate_kbps, seconds,
              100.0 * (rate_kbps - 1000.0) / 1000.0);
  EXPECT_NEAR(rate_kbps, 1000.0, 50.0);
}

}  // namespace
