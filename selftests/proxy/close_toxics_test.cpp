// The toxics that end connections: reset_peer, limit_data, timeout, slow_close.
#include <gtest/gtest.h>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

// A server that says hello and then waits for the client to go (the proxy may
// have reset it already).
void hello_then_wait(UniqueFd fd) {
  (void)::send(fd.get(), "hello", 5, MSG_NOSIGNAL);
  (void)fltest::read_to_end(fd.get());
}

TEST(ResetPeerToxic, TheClientSeesEconnresetAfterTheTimeout) {
  fltest::ScriptServer server(hello_then_wait);
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"reset_peer","attributes":{"timeout":300}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.err, ECONNRESET) << "the client saw " << (end.err ? strerror(end.err) : "a FIN");
  EXPECT_NEAR(end.seconds, 0.300, 0.050);
  std::printf("reset_peer 300 ms: ECONNRESET after %.3f s\n", end.seconds);
}

TEST(ResetPeerToxic, TimeoutZeroResetsAtOnce) {
  fltest::ScriptServer server(hello_then_wait);
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"reset_peer","attributes":{"timeout":0}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.err, ECONNRESET);
  EXPECT_LT(end.seconds, 0.1);
}

TEST(LimitDataToxic, ExactlyTheLimitThenClose) {
  fltest::ScriptServer server([](UniqueFd fd) {
    fltest::send_all(fd.get(), fltest::pattern(100'000, 6));
    (void)fltest::read_to_end(fd.get());
  });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"limit_data","attributes":{"bytes":12345}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.err, 0) << strerror(end.err);
  ASSERT_EQ(end.data.size(), 12345u);
  EXPECT_EQ(end.data, fltest::pattern(100'000, 6).substr(0, 12345));
}

TEST(LimitDataToxic, UpstreamLimitCountsWhatTheServerGets) {
  std::promise<size_t> got;
  fltest::ScriptServer server([&](UniqueFd fd) { got.set_value(fltest::read_to_end(fd.get()).data.size()); });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(
      p.registry
          ->add_toxic("p", fltest::toxic(R"({"type":"limit_data","stream":"upstream","attributes":{"bytes":1000}})"))
          .ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  fltest::send_all(c.get(), fltest::pattern(5000, 8));
  EXPECT_EQ(got.get_future().get(), 1000u);
}

TEST(TimeoutToxic, HoldsTheDataThenCloses) {
  fltest::ScriptServer server(hello_then_wait);
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"timeout","attributes":{"timeout":400}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  auto end = fltest::read_to_end(c.get());
  EXPECT_EQ(end.data, "") << "data passed a timeout toxic";
  EXPECT_EQ(end.err, 0) << strerror(end.err);
  EXPECT_NEAR(end.seconds, 0.400, 0.050);
  std::printf("timeout 400 ms: closed after %.3f s, nothing passed\n", end.seconds);
}

TEST(TimeoutToxic, ZeroHoldsUntilTheToxicIsRemoved) {
  fltest::ScriptServer server(hello_then_wait);
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"timeout","attributes":{"timeout":0}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port, 500);
  auto held = fltest::read_to_end(c.get());
  EXPECT_EQ(held.err, EAGAIN) << "the connection ended under timeout 0";
  EXPECT_EQ(held.data, "");
  ASSERT_TRUE(p.registry->remove_toxic("p", "timeout_downstream").ok());
  EXPECT_EQ(fltest::read_exact(c.get(), 5), "hello");
}

TEST(SlowCloseToxic, TheCloseArrivesLate) {
  fltest::ScriptServer server([](UniqueFd fd) { fltest::send_all(fd.get(), "bye"); });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(p.registry->add_toxic("p", fltest::toxic(R"({"type":"slow_close","attributes":{"delay":300}})")).ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  uint64_t start = fltest::monotonic_ns();
  EXPECT_EQ(fltest::read_exact(c.get(), 3), "bye");
  double data_s = double(fltest::monotonic_ns() - start) / 1e9;
  auto end = fltest::read_to_end(c.get());
  double close_s = double(fltest::monotonic_ns() - start) / 1e9;
  EXPECT_EQ(end.err, 0);
  EXPECT_LT(data_s, 0.1) << "slow_close delayed the data, not only the close";
  EXPECT_NEAR(close_s, 0.300, 0.050);
  std::printf("slow_close 300 ms: data after %.3f s, FIN after %.3f s\n", data_s, close_s);
}

}  // namespace
