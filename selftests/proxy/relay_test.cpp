// The relay without toxics, on both io_uring paths (provided buffer ring with
// multishot accept; plain per-connection buffers with one accept per connection):
// bytes exact both ways, half-close, resets, many connections at once.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <future>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using faultline::ReceiveMode;
using fltest::UniqueFd;

class RelayTest : public ::testing::TestWithParam<ReceiveMode> {
 protected:
  fltest::ProxyUnderTest proxy_for(uint16_t upstream) {
    // Plain receive goes with one accept request per connection: the path of a
    // kernel without buffer rings or multishot accept, proven on this one.
    bool ring = GetParam() == ReceiveMode::buffer_ring;
    auto p = fltest::start_proxy(upstream, GetParam(), 2,
                                 ring ? faultline::AcceptMode::multishot : faultline::AcceptMode::single);
    if (p.registry) {
      // The path asked for is the path taken.
      EXPECT_EQ(p.registry->io_paths().buffer_ring, ring);
      EXPECT_EQ(p.registry->io_paths().multishot_accept, ring);
    }
    return p;
  }
};

TEST_P(RelayTest, LargeTransfersAreByteExactBothWays) {
  fltest::EchoServer echo;
  auto p = proxy_for(echo.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  ASSERT_TRUE(c);
  const std::string data = fltest::pattern(32u << 20, 1);
  auto writer = std::async(std::launch::async, [&] {
    fltest::send_all(c.get(), data);
    ::shutdown(c.get(), SHUT_WR);
  });
  auto end = fltest::read_to_end(c.get());
  writer.get();
  EXPECT_EQ(end.err, 0) << "the echo ended with " << strerror(end.err);
  ASSERT_EQ(end.data.size(), data.size());
  EXPECT_TRUE(end.data == data) << "the 32 MiB came back changed";
  auto stats = p.registry->stats("p");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->bytes_upstream, data.size());
  EXPECT_EQ(stats->bytes_downstream, data.size());
  EXPECT_EQ(stats->connections_accepted, 1u);
}

TEST_P(RelayTest, HalfCloseCarriesEachFinOnItsOwn) {
  // The server reads to the client's FIN, then answers and closes: the answer
  // must still flow after the client's half of the connection has ended.
  fltest::ScriptServer server([](UniqueFd fd) {
    auto in = fltest::read_to_end(fd.get());
    fltest::send_all(fd.get(), "got " + std::to_string(in.data.size()));
  });
  auto p = proxy_for(server.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  fltest::send_all(c.get(), fltest::pattern(1 << 20, 2));
  ASSERT_EQ(::shutdown(c.get(), SHUT_WR), 0);
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.data, "got 1048576");
  EXPECT_EQ(end.err, 0);
}

TEST_P(RelayTest, ServerResetReachesTheClientAsReset) {
  fltest::ScriptServer server([](UniqueFd fd) {
    (void)fltest::read_exact(fd.get(), 5);
    linger l{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  });
  auto p = proxy_for(server.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  fltest::send_all(c.get(), "hello");
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.err, ECONNRESET) << "the client saw " << (end.err ? strerror(end.err) : "a FIN");
}

TEST_P(RelayTest, ClientResetReachesTheServerAsReset) {
  std::promise<int> seen;
  fltest::ScriptServer server([&](UniqueFd fd) {
    (void)fltest::read_exact(fd.get(), 5);
    seen.set_value(fltest::read_to_end(fd.get()).err);
  });
  auto p = proxy_for(server.port());
  ASSERT_TRUE(p.registry);
  {
    UniqueFd c = fltest::connect_loopback(p.port);
    fltest::send_all(c.get(), "hello");
    ::usleep(50'000);
    linger l{1, 0};
    ::setsockopt(c.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  auto f = seen.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  int err = f.get();
  EXPECT_EQ(err, ECONNRESET) << "the server saw " << (err ? strerror(err) : "a FIN");
}

TEST_P(RelayTest, AnUnreachableUpstreamClosesTheClient) {
  uint16_t dead_port = 0;
  { UniqueFd l = fltest::listen_loopback(&dead_port); }  // bound, then closed: refused
  auto p = proxy_for(dead_port);
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  auto end = fltest::read_to_end(c.get());
  EXPECT_TRUE(end.err == 0 || end.err == ECONNRESET) << strerror(end.err);
  EXPECT_LT(end.seconds, 2.0);
}

TEST_P(RelayTest, ThousandsOfConnectionsAtOnce) {
  const size_t n = std::min<uint64_t>(3000, (fltest::raise_fd_limit(16000) - 200) / 4);
  fltest::EchoServer echo;
  auto p = proxy_for(echo.port());
  ASSERT_TRUE(p.registry);
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < n; ++i) {
    clients.push_back(fltest::connect_loopback(p.port));
    ASSERT_TRUE(clients.back()) << "connection " << i << ": " << strerror(errno);
  }
  // Every connection open at once, each one carries its own bytes.
  for (size_t i = 0; i < n; ++i) fltest::send_all(clients[i].get(), fltest::pattern(1024, uint32_t(i)));
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(fltest::read_exact(clients[i].get(), 1024), fltest::pattern(1024, uint32_t(i))) << "connection " << i;
  auto stats = p.registry->stats("p");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->connections_accepted, n);
  EXPECT_EQ(stats->connections_active, n);
  clients.clear();
  uint64_t deadline = fltest::monotonic_ns() + 5'000'000'000ULL;
  while (p.registry->stats("p")->connections_active != 0 && fltest::monotonic_ns() < deadline) ::usleep(10'000);
  EXPECT_EQ(p.registry->stats("p")->connections_active, 0u);
  std::printf("relay: %zu concurrent connections through %u workers (%s)\n", n, p.registry->io_paths().workers,
              GetParam() == ReceiveMode::buffer_ring ? "buffer ring" : "plain recv");
}

INSTANTIATE_TEST_SUITE_P(ReceivePaths, RelayTest, ::testing::Values(ReceiveMode::buffer_ring, ReceiveMode::plain),
                         [](const auto& info) {
                           return std::string(info.param == ReceiveMode::buffer_ring ? "BufferRing" : "Plain");
                         });

}  // namespace

namespace {

// More connections move data at once than the ring has buffers: a receive that
// finds the ring empty (ENOBUFS) waits and tries again, nothing is lost.
TEST(BufferRing, MoreBusyConnectionsThanBuffers) {
  fltest::EchoServer echo;
  faultline::ProxyOptions options;
  options.workers = 1;
  options.receive = ReceiveMode::buffer_ring;
  options.ring_buffers = 4;
  auto reg = faultline::ProxyRegistry::start(options);
  ASSERT_TRUE(reg.ok()) << reg.error().describe();
  auto info = (*reg)->create({"p", "127.0.0.1:0", "127.0.0.1:" + std::to_string(echo.port()), true});
  ASSERT_TRUE(info.ok());
  const int n = 16;
  const size_t size = 2u << 20;
  std::vector<std::future<bool>> results;
  for (int i = 0; i < n; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      UniqueFd c = fltest::connect_loopback(fltest::port_of(info->listen_bound));
      const std::string data = fltest::pattern(size, uint32_t(100 + i));
      auto writer = std::async(std::launch::async, [&] {
        fltest::send_all(c.get(), data);
        ::shutdown(c.get(), SHUT_WR);
      });
      auto end = fltest::read_to_end(c.get());
      writer.get();
      return end.err == 0 && end.data == data;
    }));
  }
  for (int i = 0; i < n; ++i) EXPECT_TRUE(results[i].get()) << "connection " << i << " lost or changed bytes";
  auto stats = (*reg)->stats("p");
  ASSERT_TRUE(stats.ok());
  EXPECT_GT(stats->receives_without_buffer, 0u) << "the ring never ran dry: the retry path was not exercised";
  std::printf("buffer ring of 4: %llu receives found it empty and were retried\n",
              (unsigned long long)stats->receives_without_buffer);
}

}  // namespace
