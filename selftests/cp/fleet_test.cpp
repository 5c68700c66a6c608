// Many agents at once: 200 enrolled agents each run an experiment and hold a
// long poll open on one faultcp; the workspace kill switch must answer every
// poll with its stop within the issue's 1 s target (this is the smaller,
// always-run cousin of the 1000-agent bench, bench/cp_fleet_bench.cpp).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "cp_client.h"
#include "selftests/lib/loopback_port.h"

namespace {

using fltest::Backend;
using nlohmann::json;

constexpr int kAgents = 200;

struct HeldPoll {
  int fd = -1;
  int64_t experiment = 0;
  std::string in;
  bool done = false;
};

int open_poll(uint16_t port, const std::string& path, const std::string& token) {
  const int fd = fltest::connect_loopback(port);
  if (fd < 0) return -1;
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\nAuthorization: Bearer " + token + "\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class FleetTest : public ::testing::TestWithParam<Backend> {};

TEST_P(FleetTest, TheKillSwitchReachesEveryWaitingAgentWithinOneSecond) {
  auto config = fltest::test_config();
  config.poll_timeout = std::chrono::milliseconds(30'000);
  fltest::CpServer server(GetParam(), config);
  auto signup = server.call("POST", "/v1/auth/signup", "",
                            R"({"email":"ops@example.com","password":"correct horse battery","workspace":"fleet"})");
  ASSERT_EQ(signup.status, 201) << signup.describe();
  const std::string token = signup.json()["token"];
  const std::string enroll = server.call("POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json()["token"];
  std::vector<HeldPoll> polls(kAgents);
  std::vector<std::pair<int64_t, std::string>> agents;
  for (int i = 0; i < kAgents; ++i) {
    auto reg = server.call("POST", "/v1/agents/register", enroll, R"({"hostname":"host-)" + std::to_string(i) + "\"}");
    ASSERT_EQ(reg.status, 201) << reg.describe();
    const int64_t id = reg.json()["agent_id"];
    const std::string agent_token = reg.json()["token"];
    auto exp = server.call("POST", "/v1/experiments", token,
                           R"({"agent_id":)" + std::to_string(id) +
                               R"(,"spec":{"kind":"loss","target":"10.0.0.1","percent":5,"duration_sec":600}})");
    ASSERT_EQ(exp.status, 201) << exp.describe();
    polls[i].experiment = exp.json()["id"];
    const std::string base = "/v1/agents/" + std::to_string(id);
    ASSERT_EQ(server.call("GET", base + "/next?wait_ms=0", agent_token).json()["experiment"]["id"],
              polls[i].experiment);
    ASSERT_EQ(server
                  .call("POST", base + "/events", agent_token,
                        R"({"experiment_id":)" + std::to_string(polls[i].experiment) + R"(,"type":"running"})")
                  .status,
              200);
    agents.emplace_back(id, agent_token);
  }
  for (int i = 0; i < kAgents; ++i) {
    polls[i].fd = open_poll(server.port(), "/v1/agents/" + std::to_string(agents[i].first) + "/next", agents[i].second);
    ASSERT_GE(polls[i].fd, 0);
  }
  // Every poll is held (the server says so) before the kill.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string waiting;
  while (std::chrono::steady_clock::now() < settle) {
    waiting = server.call("GET", "/metrics", token).body;
    if (waiting.find("faultcp_long_polls_waiting " + std::to_string(kAgents) + "\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(waiting.find("faultcp_long_polls_waiting " + std::to_string(kAgents) + "\n"), std::string::npos) << waiting;

  const auto start = std::chrono::steady_clock::now();
  auto kill = server.call("POST", "/v1/kill", token);
  ASSERT_EQ(kill.status, 200) << kill.describe();
  int left = kAgents;
  while (left > 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    std::vector<pollfd> fds;
    std::vector<int> index;
    for (int i = 0; i < kAgents; ++i)
      if (!polls[i].done) {
        fds.push_back({polls[i].fd, POLLIN, 0});
        index.push_back(i);
      }
    if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP))) continue;
      HeldPoll& p = polls[index[k]];
      char buf[4096];
      const ssize_t n = ::recv(p.fd, buf, sizeof buf, 0);
      if (n > 0) {
        p.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      p.done = true;
      --left;
    }
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("kill switch: %d waiting agents answered in %lld ms (%s)\n", kAgents - left,
              static_cast<long long>(elapsed.count()), fltest::backend_name(GetParam()).c_str());
  RecordProperty("kill_ms", static_cast<int>(elapsed.count()));
  EXPECT_EQ(left, 0) << "agents never heard the kill";
  EXPECT_LT(elapsed, std::chrono::milliseconds(1000));
  for (auto& p : polls) {
    ::close(p.fd);
    const auto body = p.in.find("\r\n\r\n");
    ASSERT_NE(body, std::string::npos) << p.in;
    auto j = json::parse(p.in.substr(body + 4), nullptr, false);
    EXPECT_EQ(j["stop"], json::array({p.experiment})) << p.in;
    EXPECT_EQ(j["kill"], true);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, FleetTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace
