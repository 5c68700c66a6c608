// toxicity: the share of connections a toxic applies to, decided per connection.
#include <gtest/gtest.h>

#include <cmath>

#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

// Connections through a limit_data of 1 byte at `toxicity`: how many were cut.
struct Cut {
  int cut = 0;
  uint64_t activations = 0;
};

Cut count_cut_connections(double toxicity, int connections) {
  Cut result;
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  EXPECT_TRUE(p.registry);
  if (!p.registry) return result;
  auto t = fltest::toxic(R"({"type":"limit_data","attributes":{"bytes":1}})");
  t.toxicity = toxicity;
  EXPECT_TRUE(p.registry->add_toxic("p", t).ok());
  for (int i = 0; i < connections; ++i) {
    UniqueFd c = fltest::connect_loopback(p.port);
    fltest::send_all(c.get(), "0123456789");
    std::string back = fltest::read_exact(c.get(), 10);
    if (back.size() == 1)
      ++result.cut;
    else
      EXPECT_EQ(back, "0123456789");
  }
  auto stats = p.registry->stats("p");
  EXPECT_TRUE(stats.ok());
  if (stats) result.activations = stats->toxics.at(0).connections;
  return result;
}

TEST(Toxicity, ZeroNeverApplies) {
  auto r = count_cut_connections(0.0, 50);
  EXPECT_EQ(r.cut, 0);
  EXPECT_EQ(r.activations, 0u);
}

TEST(Toxicity, OneAlwaysApplies) {
  auto r = count_cut_connections(1.0, 50);
  EXPECT_EQ(r.cut, 50);
  EXPECT_EQ(r.activations, 50u);
}

TEST(Toxicity, ThreeTenthsAppliesToAboutThreeTenths) {
  const int n = 400;
  auto r = count_cut_connections(0.3, n);
  // Binomial(400, 0.3): mean 120, sd 9.2; four sd either side.
  double sd = std::sqrt(n * 0.3 * 0.7);
  std::printf("toxicity 0.3: %d of %d connections cut (expected %.0f +- %.1f)\n", r.cut, n, n * 0.3, 4 * sd);
  EXPECT_NEAR(r.cut, n * 0.3, 4 * sd);
  EXPECT_EQ(r.activations, uint64_t(r.cut)) << "the activation count is not the connections the toxic touched";
}

}  // namespace
