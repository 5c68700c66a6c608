// toxicity: the share of connections a toxic applies to, decided per connection.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

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

// Exact toxicity over many connections: 0 never applies, 1 applies to every
// one. Short-lived loopback connections from a few client threads; each is
// closed with an RST (SO_LINGER 0) so ten thousand leave no TIME_WAIT behind.
int count_cut_fast(double toxicity, int connections, int* passed) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  EXPECT_TRUE(p.registry);
  if (!p.registry) return -1;
  auto t = fltest::toxic(R"({"type":"limit_data","attributes":{"bytes":1}})");
  t.toxicity = toxicity;
  EXPECT_TRUE(p.registry->add_toxic("p", t).ok());
  std::atomic<int> cut{0}, whole{0}, next{0};
  std::vector<std::thread> clients;
  for (int k = 0; k < 4; ++k)
    clients.emplace_back([&] {
      while (next.fetch_add(1) < connections) {
        UniqueFd c = fltest::connect_loopback(p.port);
        if (!c) continue;
        if (::send(c.get(), "0123456789", 10, MSG_NOSIGNAL) != 10) continue;
        std::string back = fltest::read_exact(c.get(), 10);
        if (back == "0") ++cut;
        if (back == "0123456789") ++whole;
        linger l{1, 0};
        ::setsockopt(c.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
    });
  for (auto& th : clients) th.join();
  auto stats = p.registry->stats("p");
  EXPECT_TRUE(stats.ok());
  if (stats) EXPECT_EQ(stats->toxics.at(0).connections, uint64_t(cut.load())) << "activations";
  *passed = whole.load();
  return cut.load();
}

TEST(Toxicity, ExactOverTenThousandConnections) {
  const int n = 10000;
  int passed = 0;
  const int none = count_cut_fast(0.0, n, &passed);
  std::printf("toxicity 0: %d of %d connections cut, %d passed whole\n", none, n, passed);
  EXPECT_EQ(none, 0);
  EXPECT_EQ(passed, n);
  const int all = count_cut_fast(1.0, n, &passed);
  std::printf("toxicity 1.0: %d of %d connections cut, %d passed whole\n", all, n, passed);
  EXPECT_EQ(all, n);
  EXPECT_EQ(passed, 0);
}

// A toxic added while connections are open reaches them (Toxiproxy's toxicity
// 1.0 would skip some of them): every open connection is reset at once by a
// reset_peer of timeout 0, and with toxicity 0 none is.
TEST(Toxicity, ConnectionsOpenBeforeTheToxicGetIt) {
  for (double toxicity : {1.0, 0.0}) {
    fltest::EchoServer echo;
    auto p = fltest::start_proxy(echo.port());
    ASSERT_TRUE(p.registry);
    std::vector<UniqueFd> open;
    for (int i = 0; i < 20; ++i) {
      open.push_back(fltest::connect_loopback(p.port, 3000));
      fltest::send_all(open.back().get(), "before");
      ASSERT_EQ(fltest::read_exact(open.back().get(), 6), "before");
    }
    auto t = fltest::toxic(R"({"type":"reset_peer","attributes":{"timeout":0}})");
    t.toxicity = toxicity;
    ASSERT_TRUE(p.registry->add_toxic("p", t).ok());
    // A reset connection fails the send when the RST came first (ECONNRESET,
    // or EPIPE; the error is then spent) or else the read.
    int reset = 0;
    for (auto& c : open) {
      if (::send(c.get(), "after", 5, MSG_NOSIGNAL) != 5) {
        EXPECT_TRUE(errno == ECONNRESET || errno == EPIPE) << strerror(errno);
        ++reset;
        continue;
      }
      auto end = fltest::read_to_end(c.get(), 5);
      if (end.err == ECONNRESET)
        ++reset;
      else
        EXPECT_EQ(end.data, "after");
    }
    std::printf("toxicity %.1f: %d of 20 connections open before the add were reset\n", toxicity, reset);
    EXPECT_EQ(reset, toxicity > 0 ? 20 : 0);
    auto stats = p.registry->stats("p");
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->toxics.at(0).connections, toxicity > 0 ? 20u : 0u);
  }
}

}  // namespace
