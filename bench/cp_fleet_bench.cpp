// 7. faultcp with 1000 simulated agents (one process, one connection each)
// long-polling the real faultcp binary, on SQLite and on PostgreSQL (a
// throw-away cluster, as the cp tests start it): dispatch latency from
// POST /v1/experiments to the agent's poll answered (target p99 <= 100 ms),
// the kill switch until every agent's poll is answered (target <= 500 ms),
// experiment listing req/s (one client, then 16 with their p99: target < 20 ms), and faultcp's RSS per held poll.
// PostgreSQL's figures are also given as ratios to SQLite's, measured in the same run.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cp_client.h"
#include "cp_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/loopback_port.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int agents_wanted() {
  const char* e = std::getenv("BENCH_CP_AGENTS");
  return e ? std::max(10, std::atoi(e)) : 1000;
}

// BENCH_FAULTCP=PATH runs another faultcp binary (an earlier build, to compare
// in the same session); the one built beside this bench otherwise.
std::string faultcp_path() {
  const char* e = std::getenv("BENCH_FAULTCP");
  return e && *e ? e : FAULTCP_PATH;
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A held GET /v1/agents/{id}/next (Connection: close: the answer ends at EOF).
int open_poll(uint16_t port, int64_t agent, const std::string& token) {
  const int fd = fltest::connect_loopback(port);
  if (fd < 0) return -1;
  const std::string req = "GET /v1/agents/" + std::to_string(agent) +
                          "/next HTTP/1.1\r\nHost: b\r\nConnection: close\r\nAuthorization: Bearer " + token +
                          "\r\n\r\n";
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  return fd;
}

// Reads fd to EOF (the whole answer), waiting at most ms.
std::string read_answer(int fd, int ms) {
  std::string in;
  char buf[4096];
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  for (;;) {
    const int left =
        static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) != 1) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, size_t(n));
  }
  return in;
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())))];
}

struct Figures {
  double p50 = 0, p99 = 0, kill_ms = 0, list_rps = 0, rss_per_agent_kib = 0;
  double list16_rps = 0, list16_p99 = 0;  // 16 clients at once
  int agents = 0, dispatched = 0, killed = 0;
};

// Waits until faultcp holds n polls (its own gauge), or 10 s.
bool polls_held(uint16_t port, const std::string& token, int n) {
  const auto end = Clock::now() + 10s;
  while (Clock::now() < end) {
    auto m = fltest::cp_request(port, "GET", "/metrics", token);
    const auto at = m.body.find("\nfaultcp_long_polls_waiting ");
    if (at != std::string::npos && std::atoi(m.body.c_str() + at + 28) >= n) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

Figures run(fltest::Backend backend) {
  Figures f;
  const int n = agents_wanted();
  fltest::TestDatabase db(backend);
  const uint16_t port = fltest::free_loopback_port();
  auto cp = fltest::ChildProcess::spawn({faultcp_path(), "serve", "--listen", "127.0.0.1:" + std::to_string(port),
                                         "--database", db.url(), "--poll-timeout-ms", "120000", "--lease-ms", "600000"},
                                        {.output = fltest::Output::kFiles});
  if (!cp.wait_for("faultcp: listening on", 30s, fltest::Stream::kEither)) {
    std::fprintf(stderr, "bench: faultcp did not start: %s\n", cp.describe().c_str());
    return f;
  }
  auto call = [&](const std::string& m, const std::string& path, const std::string& token, const std::string& body) {
    return fltest::cp_request(port, m, path, token, body, 30'000);
  };
  const std::string session =
      call("POST", "/v1/auth/signup", "",
           R"({"email":"ops@example.com","password":"correct horse battery","workspace":"bench"})")
          .json()
          .value("token", "");
  const std::string enroll = call("POST", "/v1/tokens", session, R"({"kind":"enrollment"})").json().value("token", "");
  std::vector<std::pair<int64_t, std::string>> agents;
  for (int i = 0; i < n; ++i) {
    auto r =
        call("POST", "/v1/agents/register", enroll, nlohmann::json{{"hostname", "bench-" + std::to_string(i)}}.dump())
            .json();
    agents.emplace_back(r.value("agent_id", int64_t{0}), r.value("token", ""));
  }
  f.agents = n;
  const long rss_before = rss_kib(cp.pid());
  std::vector<int> fds;
  for (const auto& [id, token] : agents) fds.push_back(open_poll(port, id, token));
  if (!polls_held(port, session, n)) std::fprintf(stderr, "bench: not every poll was held\n");
  f.rss_per_agent_kib = static_cast<double>(rss_kib(cp.pid()) - rss_before) / n;

  // Dispatch: one experiment per agent, in turn, timed until its poll answers.
  std::vector<double> lat;
  const std::string spec = R"("spec":{"kind":"loss","target":"10.0.0.1","percent":1,"duration_sec":3600}})";
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    auto post =
        call("POST", "/v1/experiments", session, R"({"agent_id":)" + std::to_string(agents[i].first) + "," + spec);
    const std::string answer = read_answer(fds[i], 5000);
    if (post.status == 201 && answer.find("\"experiment\":{") != std::string::npos) {
      lat.push_back(ms_since(t0));
      ++f.dispatched;
    }
    ::close(fds[i]);
    fds[i] = open_poll(port, agents[i].first, agents[i].second);
  }
  f.p50 = percentile(lat, 50);
  f.p99 = percentile(lat, 99);
  if (!polls_held(port, session, n)) std::fprintf(stderr, "bench: not every poll was held again\n");

  // Listing, while every agent holds its poll.
  {
    int count = 0;
    const auto t0 = Clock::now();
    while (ms_since(t0) < 3000) {
      if (call("GET", "/v1/experiments?limit=50", session, "").status == 200) ++count;
    }
    f.list_rps = count / (ms_since(t0) / 1000.0);
  }
  // The same with 16 clients at once (one connection per request, as above):
  // req/s over all of them and the p99 of each request's latency.
  {
    constexpr int kClients = 16;
    std::vector<std::vector<double>> lat16(kClients);
    std::vector<int> ok(kClients, 0);
    std::vector<std::thread> clients;
    const auto t0 = Clock::now();
    for (int c = 0; c < kClients; ++c)
      clients.emplace_back([&, c] {
        while (ms_since(t0) < 3000) {
          const auto r0 = Clock::now();
          if (call("GET", "/v1/experiments?limit=50", session, "").status != 200) continue;
          lat16[c].push_back(ms_since(r0));
          ++ok[c];
        }
      });
    for (auto& t : clients) t.join();
    std::vector<double> all;
    int count = 0;
    for (int c = 0; c < kClients; ++c) {
      all.insert(all.end(), lat16[c].begin(), lat16[c].end());
      count += ok[c];
    }
    f.list16_rps = count / (ms_since(t0) / 1000.0);
    f.list16_p99 = percentile(all, 99);
  }

  // The kill switch: every agent holds a poll and a dispatched experiment.
  const auto t0 = Clock::now();
  auto k = call("POST", "/v1/kill", session, "");
  std::vector<bool> done(fds.size(), false);
  std::vector<pollfd> pfds;
  while (f.killed < n && ms_since(t0) < 10'000) {
    pfds.clear();
    for (size_t i = 0; i < fds.size(); ++i)
      if (!done[i]) pfds.push_back({fds[i], POLLIN, 0});
    if (::poll(pfds.data(), pfds.size(), 100) <= 0) continue;
    for (const auto& p : pfds) {
      if (!(p.revents & (POLLIN | POLLHUP))) continue;
      const size_t i = std::find(fds.begin(), fds.end(), p.fd) - fds.begin();
      const std::string answer = read_answer(p.fd, 1000);
      done[i] = true;
      if (answer.find("\"stop\":[") != std::string::npos) ++f.killed;
    }
  }
  f.kill_ms = k.status == 200 ? ms_since(t0) : -1;
  for (int fd : fds) ::close(fd);
  cp.stop(5000ms);
  return f;
}

const char* met(bool ok) { return ok ? "MET" : "MISSED"; }

}  // namespace

int main() {
  const Figures s = run(fltest::Backend::Sqlite);
  const Figures p = run(fltest::Backend::Postgres);
  std::printf("\nfaultcp, %d simulated agents long-polling one faultcp (one process, one connection each)\n", s.agents);
  std::printf("%-34s %12s %12s %10s\n", "", "SQLite", "PostgreSQL", "PG/SQLite");
  auto row = [](const char* what, double a, double b, const char* unit) {
    std::printf("%-34s %9.1f %-2s %9.1f %-2s %9.2fx\n", what, a, unit, b, unit, a > 0 ? b / a : 0.0);
  };
  row("dispatch latency p50", s.p50, p.p50, "ms");
  row("dispatch latency p99", s.p99, p.p99, "ms");
  row("kill switch to every agent", s.kill_ms, p.kill_ms, "ms");
  row("GET /v1/experiments?limit=50", s.list_rps, p.list_rps, "/s");
  row("  the same, 16 clients", s.list16_rps, p.list16_rps, "/s");
  row("  16 clients, p99 latency", s.list16_p99, p.list16_p99, "ms");
  row("faultcp RSS per held poll", s.rss_per_agent_kib, p.rss_per_agent_kib, "KiB");
  std::printf("dispatched %d/%d and %d/%d; kill answered %d/%d and %d/%d\n", s.dispatched, s.agents, p.dispatched,
              p.agents, s.killed, s.agents, p.killed, p.agents);
  std::printf(
      "targets: dispatch p99 <= 100 ms: SQLite %s, PostgreSQL %s; kill <= 500 ms: SQLite %s, PostgreSQL %s;\n"
      "         listing p99 < 20 ms at 16 clients: SQLite %s, PostgreSQL %s\n",
      met(s.p99 <= 100 && s.dispatched == s.agents), met(p.p99 <= 100 && p.dispatched == p.agents),
      met(s.kill_ms >= 0 && s.kill_ms <= 500 && s.killed == s.agents),
      met(p.kill_ms >= 0 && p.kill_ms <= 500 && p.killed == p.agents), met(s.list16_p99 < 20), met(p.list16_p99 < 20));
  return 0;
}
