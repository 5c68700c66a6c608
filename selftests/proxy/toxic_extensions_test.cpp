// Faultline's toxic extensions over real loopback TCP: first_n (the first N
// connections after the add, then the rest pass), limit_time (the cable pulled
// after N ms) and slow_open (the upstream connect waits).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

// One "ping" through the proxy: whether an RST ended it, else what came back.
// The RST may come before the send, which then fails with it (ECONNRESET, or
// EPIPE), spending the error so the read sees only an end; or after, and the
// read fails with it.
struct Ping {
  bool reset = false;
  std::string data;
};
Ping ping(uint16_t port) {
  UniqueFd c = fltest::connect_loopback(port, 5000);
  Ping out;
  if (::send(c.get(), "ping", 4, MSG_NOSIGNAL) != 4) {
    out.reset = errno == ECONNRESET || errno == EPIPE;
    return out;
  }
  auto end = fltest::read_to_end(c.get(), 4);
  out.reset = end.err == ECONNRESET;
  out.data = end.data;
  return out;
}

TEST(FirstN, ExactlyTheFirstThreeConnectionsAreResetTheRestPass) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  // A connection open before the toxic is neither counted nor reset.
  UniqueFd before = fltest::connect_loopback(p.port, 5000);
  fltest::send_all(before.get(), "old1");
  ASSERT_EQ(fltest::read_exact(before.get(), 4), "old1");
  ASSERT_TRUE(
      p.registry->add_toxic("p", fltest::toxic(R"({"type":"reset_peer","attributes":{"timeout":0,"first_n":3}})"))
          .ok());
  std::string seen;
  for (int i = 0; i < 10; ++i) {
    auto end = ping(p.port);
    const bool reset = end.reset && end.data.empty();
    const bool passed = !end.reset && end.data == "ping";
    EXPECT_TRUE(reset || passed) << "connection " << i << ": neither reset nor passed, \"" << end.data << "\"";
    EXPECT_EQ(reset, i < 3) << "connection " << i;
    seen += reset ? 'R' : passed ? '.' : '?';
  }
  std::printf("reset_peer first_n=3 over 10 connections: %s (R reset, . passed)\n", seen.c_str());
  fltest::send_all(before.get(), "old2");
  EXPECT_EQ(fltest::read_exact(before.get(), 4), "old2") << "the connection open before the add was touched";
  auto stats = p.registry->stats("p");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->toxics.at(0).connections, 3u);
}

TEST(FirstN, OnLatencyOnlyTheFirstConnectionsWait) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(
      p.registry->add_toxic("p", fltest::toxic(R"({"type":"latency","attributes":{"latency":300,"first_n":2}})")).ok());
  for (int i = 0; i < 5; ++i) {
    UniqueFd c = fltest::connect_loopback(p.port, 5000);
    const double ms = fltest::round_trip_ms(c.get());
    std::printf("latency first_n=2, connection %d: %.1f ms\n", i, ms);
    if (i < 2) EXPECT_GE(ms, 300.0) << "connection " << i;
  }
  auto stats = p.registry->stats("p");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->toxics.at(0).connections, 2u) << "the later connections met the latency";
}

// limit_time: data flows, then at its time the connection closes (a FIN to
// both sides; a send racing it may meet the RST of the closed socket).
TEST(LimitTime, DataFlowsThenTheConnectionIsCutAtItsTime) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"limit_time","attributes":{"time":400}})")).ok());
  const uint64_t start = fltest::monotonic_ns();
  UniqueFd c = fltest::connect_loopback(p.port, 5000);
  const std::string block = fltest::pattern(1024, 3);
  size_t echoed = 0;
  int err = EAGAIN;
  double last_ok_s = 0;
  while (fltest::monotonic_ns() - start < 5'000'000'000ULL) {
    if (::send(c.get(), block.data(), block.size(), MSG_NOSIGNAL) != ssize_t(block.size())) {
      err = errno;
      break;
    }
    auto back = fltest::read_to_end(c.get(), block.size());
    echoed += back.data.size();
    if (back.data.size() != block.size()) {
      err = back.err;
      break;
    }
    EXPECT_EQ(back.data, block);
    last_ok_s = double(fltest::monotonic_ns() - start) / 1e9;
  }
  const double end_s = double(fltest::monotonic_ns() - start) / 1e9;
  std::printf("limit_time 400 ms: %zu bytes echoed, the last at %.3f s; cut at %.3f s (%s)\n", echoed, last_ok_s, end_s,
              err ? strerror(err) : "EOF");
  EXPECT_TRUE(err == 0 || err == ECONNRESET || err == EPIPE) << "not cut: " << strerror(err);
  EXPECT_GE(end_s, 0.400) << "cut before its time";
  EXPECT_LT(end_s, 2.5) << "not cut near its time";
  EXPECT_GE(last_ok_s, 0.2) << "data did not flow while the time ran";
  EXPECT_GT(echoed, 10u * block.size());
}

// slow_open: connect() returns at once (the kernel completes the handshake),
// but the upstream sees the connection, and the client its first byte, only
// after the delay.
TEST(SlowOpen, TheFirstByteAndTheUpstreamConnectWaitTheDelay) {
  std::atomic<uint64_t> upstream_accept_ns{0};
  fltest::ScriptServer server([&](UniqueFd fd) {
    upstream_accept_ns = fltest::monotonic_ns();
    char b[16];
    ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
    if (n > 0) (void)::send(fd.get(), b, size_t(n), MSG_NOSIGNAL);
    (void)fltest::read_to_end(fd.get());
  });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"slow_open","attributes":{"delay":500}})")).ok());
  const uint64_t start = fltest::monotonic_ns();
  UniqueFd c = fltest::connect_loopback(p.port, 5000);
  const double connect_ms = double(fltest::monotonic_ns() - start) / 1e6;
  fltest::send_all(c.get(), "ping");
  const std::string back = fltest::read_exact(c.get(), 4);
  const double first_byte_ms = double(fltest::monotonic_ns() - start) / 1e6;
  const double upstream_ms = double(upstream_accept_ns.load() - start) / 1e6;
  std::printf("slow_open 500 ms: connect() %.1f ms, upstream accept %.1f ms, first byte %.1f ms\n", connect_ms,
              upstream_ms, first_byte_ms);
  EXPECT_EQ(back, "ping");
  EXPECT_LT(connect_ms, 500.0) << "connect() itself waited";
  EXPECT_GE(upstream_ms, 500.0);
  EXPECT_GE(first_byte_ms, 500.0);
  EXPECT_LT(first_byte_ms, 3000.0);
}

// Removing the toxic releases a connection still waiting to open.
TEST(SlowOpen, RemovingTheToxicReleasesWaitingConnections) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"slow_open","attributes":{"delay":60000}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port, 10000);
  fltest::send_all(c.get(), "ping");
  ::usleep(200'000);
  const uint64_t removed = fltest::monotonic_ns();
  ASSERT_TRUE(p.registry->remove_toxic("p", "slow_open_downstream").ok());
  EXPECT_EQ(fltest::read_exact(c.get(), 4), "ping");
  const double ms = double(fltest::monotonic_ns() - removed) / 1e6;
  std::printf("slow_open 60 s removed: the waiting connection answered %.1f ms later\n", ms);
  EXPECT_LT(ms, 3000.0);
}

}  // namespace
