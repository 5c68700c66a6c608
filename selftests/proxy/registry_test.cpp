// The registry's contract: toxics change open connections, disabling closes,
// the errors the REST layer maps to status codes, stats.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using faultline::ProxyUpdate;
using fltest::UniqueFd;

TEST(ProxyRegistry, ToxicChangesReachAnOpenConnection) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  EXPECT_LT(fltest::round_trip_ms(c.get()), 20.0);
  ASSERT_TRUE(
      p.registry->add_toxic("p", fltest::toxic(R"({"name":"lag","type":"latency","attributes":{"latency":100}})"))
          .ok());
  double added = fltest::round_trip_ms(c.get());
  // A delay is never shorter than asked; a loaded machine makes it longer, so
  // the upper bounds only keep the three states (0, 100, 200 ms) apart.
  EXPECT_GE(added, 99.0) << "the toxic added on the open connection";
  EXPECT_LT(added, 160.0) << "the toxic added on the open connection";
  auto updated = fltest::toxic(R"({"name":"lag","type":"latency","attributes":{"latency":200}})");
  ASSERT_TRUE(p.registry->update_toxic("p", "lag", updated).ok());
  double changed = fltest::round_trip_ms(c.get());
  EXPECT_GE(changed, 199.0) << "the toxic updated on the open connection";
  EXPECT_LT(changed, 260.0) << "the toxic updated on the open connection";
  ASSERT_TRUE(p.registry->remove_toxic("p", "lag").ok());
  double removed = fltest::round_trip_ms(c.get());
  EXPECT_LT(removed, 60.0) << "the toxic removed from the open connection";
  std::printf("one connection: %.1f ms with latency 100, %.1f ms at 200, %.2f ms removed\n", added, changed, removed);
}

TEST(ProxyRegistry, AToxicAddedToAnIdleConnectionStartsItsClock) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  ::usleep(100'000);
  uint64_t start = fltest::monotonic_ns();
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"reset_peer","attributes":{"timeout":200}})")).ok());
  auto end = fltest::read_to_end(c.get());
  double s = double(fltest::monotonic_ns() - start) / 1e9;
  EXPECT_EQ(end.err, ECONNRESET);
  EXPECT_NEAR(s, 0.200, 0.040);
}

TEST(ProxyRegistry, DisablingClosesTheListenerAndTheConnections) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  EXPECT_LT(fltest::round_trip_ms(c.get()), 20.0);
  auto down = p.registry->update("p", ProxyUpdate{.enabled = false});
  ASSERT_TRUE(down.ok()) << down.error().describe();
  EXPECT_EQ(down->listen_bound, "");
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.data, "");
  EXPECT_LT(end.seconds, 1.0) << "the open connection was not closed";
  EXPECT_FALSE(fltest::connect_loopback(p.port)) << "a disabled proxy still accepts";
  EXPECT_EQ(errno, ECONNREFUSED);
  // Enabled again on the same port (port 0 was resolved once, as Toxiproxy does).
  auto up = p.registry->update("p", ProxyUpdate{.enabled = true});
  ASSERT_TRUE(up.ok()) << up.error().describe();
  EXPECT_EQ(fltest::port_of(up->listen_bound), p.port);
  UniqueFd again = fltest::connect_loopback(p.port);
  ASSERT_TRUE(again);
  EXPECT_LT(fltest::round_trip_ms(again.get()), 20.0);
}

TEST(ProxyRegistry, ChangingTheUpstreamRestartsTheProxy) {
  fltest::EchoServer first;
  fltest::ScriptServer second([](UniqueFd fd) { fltest::send_all(fd.get(), "second"); });
  auto p = fltest::start_proxy(first.port());
  ASSERT_TRUE(p.registry);
  UniqueFd c = fltest::connect_loopback(p.port);
  EXPECT_LT(fltest::round_trip_ms(c.get()), 20.0);
  auto moved = p.registry->update("p", ProxyUpdate{.upstream = "127.0.0.1:" + std::to_string(second.port())});
  ASSERT_TRUE(moved.ok()) << moved.error().describe();
  EXPECT_EQ(fltest::read_to_end(c.get()).data, "") << "the old connection stays open across a restart";
  UniqueFd c2 = fltest::connect_loopback(fltest::port_of(moved->listen_bound));
  EXPECT_EQ(fltest::read_exact(c2.get(), 6), "second");
}

TEST(ProxyRegistry, ErrorsCarryTheCodeTheApiMapsToAStatus) {
  fltest::EchoServer echo;
  auto p = fltest::start_proxy(echo.port());
  ASSERT_TRUE(p.registry);
  auto& r = *p.registry;
  auto dup = r.create({"p", "127.0.0.1:0", "127.0.0.1:1", true});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().err, EEXIST);
  EXPECT_EQ(r.get("nope").error().err, ENOENT);
  EXPECT_EQ(r.remove("nope").error().err, ENOENT);
  auto bad = r.create({"q", "127.0.0.1:99999", "127.0.0.1:1", true});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().bad_input) << bad.error().describe();
  EXPECT_FALSE(r.create({"", "127.0.0.1:0", "127.0.0.1:1", true}).ok());
  // The port p listens on is taken: EADDRINUSE, nothing created.
  auto taken = r.create({"q", "127.0.0.1:0", "127.0.0.1:1", true});
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(r.remove("q").ok());
  UniqueFd squatter;
  uint16_t port = 0;
  squatter = fltest::listen_loopback(&port);
  auto in_use = r.create({"q", "127.0.0.1:" + std::to_string(port), "127.0.0.1:1", true});
  ASSERT_FALSE(in_use.ok());
  EXPECT_EQ(in_use.error().err, EADDRINUSE) << in_use.error().describe();
  EXPECT_EQ(r.get("q").error().err, ENOENT);
  // Toxics.
  auto t = fltest::toxic(R"({"type":"noop"})");
  ASSERT_TRUE(r.add_toxic("p", t).ok());
  EXPECT_EQ(r.add_toxic("p", t).error().err, EEXIST);
  EXPECT_EQ(r.add_toxic("nope", t).error().err, ENOENT);
  EXPECT_EQ(r.remove_toxic("p", "nope").error().err, ENOENT);
  EXPECT_EQ(r.get_toxic("p", "noop_downstream")->name, "noop_downstream");
  auto bad_toxic = t;
  bad_toxic.name = "";
  EXPECT_TRUE(r.add_toxic("p", bad_toxic).error().bad_input);
  ASSERT_EQ(r.list().size(), 1u);
  EXPECT_EQ(r.list()[0].toxics.size(), 1u);
  ASSERT_TRUE(r.reset().ok());
  EXPECT_EQ(r.get("p")->toxics.size(), 0u);
}

TEST(ProxyRegistry, ListensOnIpv6) {
  fltest::EchoServer echo;
  auto reg = faultline::ProxyRegistry::start({.workers = 1});
  ASSERT_TRUE(reg.ok());
  auto info = (*reg)->create({"v6", "[::1]:0", "127.0.0.1:" + std::to_string(echo.port()), true});
  ASSERT_TRUE(info.ok()) << info.error().describe();
  EXPECT_EQ(info->listen_bound.rfind("[::1]:", 0), 0u) << info->listen_bound;
  UniqueFd c(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  a.sin6_port = htons(fltest::port_of(info->listen_bound));
  ASSERT_EQ(::connect(c.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  fltest::send_all(c.get(), "over six");
  EXPECT_EQ(fltest::read_exact(c.get(), 8), "over six");
}

TEST(ProxyRegistry, StatsCountConnectionsAndBytesPerDirection) {
  fltest::ScriptServer server([](UniqueFd fd) {
    (void)fltest::read_exact(fd.get(), 1000);
    fltest::send_all(fd.get(), std::string(5000, 'x'));
  });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  for (int i = 0; i < 3; ++i) {
    UniqueFd c = fltest::connect_loopback(p.port);
    fltest::send_all(c.get(), std::string(1000, 'a'));
    EXPECT_EQ(fltest::read_to_end(c.get()).data.size(), 5000u);
  }
  uint64_t deadline = fltest::monotonic_ns() + 2'000'000'000ULL;
  while (p.registry->stats("p")->connections_active != 0 && fltest::monotonic_ns() < deadline) ::usleep(5000);
  auto s = p.registry->stats("p");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->connections_accepted, 3u);
  EXPECT_EQ(s->connections_active, 0u);
  EXPECT_EQ(s->bytes_upstream, 3000u);
  EXPECT_EQ(s->bytes_downstream, 15000u);
}

}  // namespace
