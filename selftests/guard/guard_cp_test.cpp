// faultctl guard with faultcp, as a user would run it: the real faultcp
// (SQLite, loopback) and the real faultctl guard (as nobody when the test runs
// as root) with real curl through its proxy: the workspace's policy enforced
// and a new version live within a second, held requests decided through
// faultcp's API within a second, the first decision winning, and the activity
// chain delivered exactly once through a faultcp killed with -9 and restarts
// of the guard. Loopback only.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "selftests/cp/hook_receiver.h"
#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/proxy/seen_upstream.h"
#include "selftests/tls/tls_harness.h"
#include "userspace/guardrails/http_client.h"

namespace {

using fltest::ChildProcess;
using fltest::UniqueFd;
using nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kFaultctl = FAULTCTL_PATH;
const std::string kFaultcp = FAULTCP_PATH;

using Upstream = fltest::SeenUpstream;

struct Reply {
  int status = 0;
  json body = json::object();
};

// faultcp on 127.0.0.1: started on a free port, restarted on the same one
// (its guards keep their URL), its SQLite database in the test's folder.
class Faultcp {
 public:
  explicit Faultcp(std::string db) : db_(std::move(db)) {}
  void start() {
    const std::string listen = "127.0.0.1:" + std::to_string(port_);
    proc_.emplace(ChildProcess::spawn({kFaultcp, "serve", "--listen", listen, "--database", "sqlite:" + db_}));
    auto line = proc_->wait_line_starting("faultcp: listening on", 20s);
    ASSERT_TRUE(line) << proc_->describe();
    port_ = static_cast<uint16_t>(std::stoul(line->substr(line->find("127.0.0.1:") + 10)));
  }
  void kill9() { proc_->kill_and_reap(); }
  void stop() {
    if (proc_) proc_->stop();
  }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  Reply call(const std::string& method, const std::string& path, const std::string& token, const json& body = {}) {
    auto client = faultline::HttpClient::create({});
    auto u = faultline::parse_http_url(url() + path);
    faultline::HttpCall c;
    c.method = method;
    c.headers = {{"Authorization", "Bearer " + token}};
    if (!body.is_null()) {
      c.body = body.dump();
      c.headers.emplace_back("Content-Type", "application/json");
    }
    auto a = client->call(*u, c, 10'000'000'000ULL);
    if (!a) return {};
    auto j = json::parse(a->response.body, nullptr, false);
    return {a->response.status.code, j.is_object() ? j : json::object()};
  }

 private:
  std::string db_;
  uint16_t port_ = 0;
  std::optional<ChildProcess> proc_;
};

std::vector<std::string> as_user(std::vector<std::string> argv) { return fltest::as_nobody(std::move(argv)); }

// Polls until pred holds or the deadline; true if it held.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds within) {
  const auto end = Clock::now() + within;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

class GuardCpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    cp_.start();
    auto signup = cp_.call("POST", "/v1/auth/signup", "",
                           {{"email", "a@example.com"}, {"password", "correct horse battery"}, {"workspace", "w"}});
    ASSERT_EQ(signup.status, 201) << signup.body;
    session_ = signup.body.value("token", "");
    const std::string enroll =
        cp_.call("POST", "/v1/tokens", session_, {{"kind", "enrollment"}}).body.value("token", "");
    agent_ = cp_.call("POST", "/v1/agents/register", enroll, {{"hostname", "laptop-7"}}).body.value("token", "");
    ASSERT_FALSE(agent_.empty());
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_CP=", "FAULTLINE_CP_TOKEN="});
  }
  void TearDown() override { cp_.stop(); }

  void put_policy(const json& section) {
    auto r = cp_.call("PUT", "/v1/guardrails/policy", session_, section);
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r.status << " " << r.body;
  }
  // `own`: a second guard of the same identity keeps its own state and log.
  std::vector<std::string> guard_argv(std::vector<std::string> extra, std::vector<std::string> cmd,
                                      const std::string& own = "") {
    std::vector<std::string> argv = {
        kFaultctl,    "guard",          "--control-plane", cp_.url(),
        "--token",    agent_,           "--state-dir",     dir_.file("state" + own),
        "--identity", "alice@laptop-7", "--json-log",      dir_.file("act" + own + ".jsonl")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return as_user(argv);
  }
  ChildProcess guard(std::vector<std::string> extra, std::vector<std::string> cmd, const std::string& own = "") {
    return ChildProcess::spawn(guard_argv(std::move(extra), std::move(cmd), own), {.env = env_, .stop_grace = 5s});
  }
  // A command that asks url every 50 ms, one status code a line, until STOP exists.
  std::vector<std::string> loop(const std::string& url) {
    return {"sh", "-c",
            "while [ ! -e " + dir_.file("STOP") + " ]; do curl -s -o /dev/null --max-time 10 -w '%{http_code}\\n' " +
                url + "; sleep 0.05; done"};
  }
  void stop_loop() { std::ofstream(dir_.file("STOP")) << "\n"; }
  // The one approval faultcp holds pending for this workspace.
  std::optional<json> pending_approval() {
    std::optional<json> found;
    eventually(
        [&] {
          auto r = cp_.call("GET", "/v1/guardrails/approvals", session_);
          for (const auto& a : r.body.value("approvals", json::array()))
            if (a.value("state", "") == "pending") found = a;
          return found.has_value();
        },
        10s);
    return found;
  }

  fltest::TempDir dir_;
  Faultcp cp_{dir_.file("cp.db")};
  std::string session_, agent_;
  std::vector<std::string> env_;
};

TEST_F(GuardCpTest, TheWorkspacePolicyIsEnforcedAndANewVersionIsLiveWithinASecond) {
  Upstream up;
  put_policy({{"mode", "enforce"},
              {"default_allow", true},
              {"rules", {{{"name", "no-up"}, {"action", "deny"}, {"host", up.host()}, {"reason", "not now"}}}}});
  auto g = guard({}, loop(up.url("/x")));
  ASSERT_TRUE(g.wait_line([](const std::string& l) { return l == "403"; }, 20s)) << g.describe();
  EXPECT_EQ(up.requests(), 0);
  const auto t0 = Clock::now();
  put_policy({{"mode", "enforce"}, {"default_allow", true}, {"rules", json::array()}});
  ASSERT_TRUE(g.wait_line([](const std::string& l) { return l == "200"; }, 5s)) << g.describe();
  const auto took = Clock::now() - t0;
  EXPECT_LT(took, 1000ms) << "the new version took "
                          << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  stop_loop();
  auto end = g.finish(20s);
  EXPECT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_NE(end.err.find("the workspace's guard policy v1"), std::string::npos) << end.err;
  EXPECT_NE(end.err.find("guard policy v2 is live: enforce, default allow, 0 rules"), std::string::npos) << end.err;
}

// --intent-firewall's finding reaches faultcp, whose off-mission-action
// alert trigger posts it to the workspace's webhook.
TEST_F(GuardCpTest, AnOffMissionActionRaisesItsAlertAtTheWorkspacesWebhook) {
  Upstream model, other;
  fltest::HookReceiver hook;
  put_policy({{"mode", "monitor"}, {"default_allow", true}, {"rules", json::array()}});
  auto a = cp_.call("PUT", "/v1/guardrails/alerts", session_,
                    {{"url", hook.url()}, {"secret", "alert-secret-0123456789"}, {"triggers", {"off-mission-action"}}});
  ASSERT_EQ(a.status, 200) << a.body;
  const json call = {{"model", "gpt-test"},
                     {"messages", {{{"role", "user"}, {"content", "Tidy the README of this repository."}}}}};
  fltest::write_file(dir_.file("call.json"), call.dump());
  ASSERT_EQ(::chmod(dir_.file("call.json").c_str(), 0644), 0);
  const std::string c = "curl -sS -o /dev/null --max-time 20 ";
  auto r = fltest::run_command(
      guard_argv({"--intent-firewall"},
                 {"sh", "-c",
                  c + "-H 'Content-Type: application/json' --data-binary @" + dir_.file("call.json") + " " +
                      model.url("/v1/chat/completions") + "; " + c + "-d all=1 " + other.url("/collect")}),
      {.env = env_}, 60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  const auto got = hook.wait_for(1, 300ms);
  ASSERT_EQ(got.size(), 1u) << r.err;
  EXPECT_EQ(got[0].header("x-faultline-trigger").value_or(""), "off-mission-action");
  const json body = json::parse(got[0].body, nullptr, false);
  EXPECT_EQ(body.value("trigger", ""), "off-mission-action") << got[0].body;
  EXPECT_NE(got[0].body.find("/collect"), std::string::npos) << got[0].body;
}

TEST_F(GuardCpTest, LocalRuleFlagsAreRefusedWithAControlPlane) {
  auto r = fltest::run_command(guard_argv({"--deny", "example.com"}, {"true"}), {.env = env_}, 20s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--deny with --control-plane"), std::string::npos) << r.err;
}

TEST_F(GuardCpTest, HeldRequestApprovedThroughFaultcpReachesItsUpstreamWithinASecond) {
  Upstream up;
  put_policy({{"mode", "enforce"}, {"rules", {{{"name", "ask"}, {"action", "approve"}, {"host", up.host()}}}}});
  auto g = guard({}, {"curl", "-sS", "--max-time", "20", "-w", "[%{http_code}]", up.url("/deploy")});
  auto a = pending_approval();
  ASSERT_TRUE(a) << g.describe();
  EXPECT_EQ((*a)["identity"], "alice@laptop-7");
  EXPECT_EQ((*a)["path"], "/deploy");
  EXPECT_EQ((*a)["rule"], "ask");
  EXPECT_EQ((*a)["request_id"].get<std::string>().rfind("req_", 0), 0u) << *a;
  EXPECT_EQ(up.requests(), 0);
  const std::string id = std::to_string((*a)["id"].get<int64_t>());
  const auto t0 = Clock::now();
  auto ok = cp_.call("POST", "/v1/guardrails/approvals/" + id + "/approve", session_, {{"reason", "checked"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  ASSERT_TRUE(eventually([&] { return up.requests() == 1; }, 5s)) << g.describe();
  const auto took = Clock::now() - t0;
  EXPECT_LT(took, 1000ms) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  auto end = g.finish(20s);
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_EQ(end.out, "upstream saw GET /deploy HTTP/1.1[200]");
  EXPECT_NE(end.err.find("held 1  approved 1"), std::string::npos) << end.err;
}

TEST_F(GuardCpTest, HeldRequestDeniedThroughFaultcpGetsTheDenial) {
  Upstream up;
  put_policy({{"mode", "enforce"}, {"rules", {{{"name", "ask"}, {"action", "approve"}, {"host", up.host()}}}}});
  auto g = guard({}, {"curl", "-sS", "--max-time", "20", "-w", "[%{http_code}]", up.url("/deploy")});
  auto a = pending_approval();
  ASSERT_TRUE(a) << g.describe();
  const std::string id = std::to_string((*a)["id"].get<int64_t>());
  const auto t0 = Clock::now();
  auto no = cp_.call("POST", "/v1/guardrails/approvals/" + id + "/deny", session_, {{"reason", "not today"}});
  ASSERT_EQ(no.status, 200) << no.body;
  ASSERT_TRUE(g.wait_for("[403]", 5s)) << g.describe();
  EXPECT_LT(Clock::now() - t0, 1000ms);
  auto end = g.finish(20s);
  EXPECT_NE(end.out.find("denied by a person: not today"), std::string::npos) << end.out;
  EXPECT_NE(end.out.find((*a)["request_id"].get<std::string>()), std::string::npos) << end.out;
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(GuardCpTest, ALocalDecisionWinsAndWithdrawsTheFaultcpCopy) {
  Upstream up;
  put_policy({{"mode", "enforce"}, {"rules", {{{"name", "ask"}, {"action", "approve"}, {"host", up.host()}}}}});
  auto g = guard({}, {"curl", "-sS", "--max-time", "20", "-w", "[%{http_code}]", up.url("/deploy")});
  auto a = pending_approval();
  ASSERT_TRUE(a) << g.describe();
  // The local id is "<guard pid>.<n>"; the request id names the same pid.
  const std::string rid = (*a)["request_id"].get<std::string>();
  const std::string pid = rid.substr(4, rid.rfind('_') - 4);
  auto list = fltest::run_command(as_user({kFaultctl, "approvals", "list", "--json"}), {.env = env_}, 20s);
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  std::string local;
  for (const auto& p : json::parse(list.out))
    if (p.value("id", "").rfind(pid + ".", 0) == 0) local = p["id"];
  ASSERT_FALSE(local.empty()) << list.out;
  auto ok = fltest::run_command(as_user({kFaultctl, "approvals", "approve", local}), {.env = env_}, 20s);
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  auto end = g.finish(20s);
  EXPECT_EQ(end.out, "upstream saw GET /deploy HTTP/1.1[200]") << end.describe();
  const std::string id = std::to_string((*a)["id"].get<int64_t>());
  EXPECT_TRUE(eventually(
      [&] {
        return cp_.call("GET", "/v1/guardrails/approvals/" + id + "/decision", agent_).body.value("state", "") ==
               "withdrawn";
      },
      5s));
  auto late = cp_.call("POST", "/v1/guardrails/approvals/" + id + "/approve", session_, json::object());
  EXPECT_EQ(late.status, 409) << late.body;
}

TEST_F(GuardCpTest, AClientThatLeavesWithdrawsTheFaultcpCopy) {
  Upstream up;
  put_policy({{"mode", "enforce"}, {"rules", {{{"name", "ask"}, {"action", "approve"}, {"host", up.host()}}}}});
  auto g = guard({}, {"sh", "-c", "curl -sS --max-time 2 " + up.url("/w") + "; sleep 1"});
  auto a = pending_approval();
  ASSERT_TRUE(a) << g.describe();
  auto end = g.finish(20s);
  EXPECT_NE(end.err.find("-> withdrawn (the client went away)"), std::string::npos) << end.describe();
  const std::string id = std::to_string((*a)["id"].get<int64_t>());
  EXPECT_TRUE(eventually(
      [&] {
        return cp_.call("GET", "/v1/guardrails/approvals/" + id + "/decision", agent_).body.value("state", "") ==
               "withdrawn";
      },
      5s));
  EXPECT_EQ(up.requests(), 0);
}

// Every line of the local log, by (identity, seq): its hash.
std::map<std::pair<std::string, uint64_t>, std::string> local_lines(const std::string& path) {
  std::map<std::pair<std::string, uint64_t>, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = json::parse(line);
    out[{j["identity"], j["seq"]}] = j["hash"];
  }
  return out;
}

TEST_F(GuardCpTest, TheActivityChainArrivesExactlyOnceThroughFaultcpAndGuardRestarts) {
  Upstream up;
  put_policy({{"mode", "enforce"},
              {"default_allow", true},
              {"rules", {{{"name", "no-secrets"}, {"action", "deny"}, {"host", up.host()}, {"path", "/secret"}}}}});
  auto stored = [&] {
    return cp_.call("GET", "/v1/guardrails/activity?limit=1000", session_).body.value("entries", json::array());
  };
  // 1. faultcp up: the activity flows as it happens.
  // The path rule needs the request's bytes: --terminate-tls (plain HTTP is
  // judged by path either way).
  const std::vector<std::string> tls = {"--terminate-tls"};
  auto g = guard(tls, loop(up.url("/a")));
  ASSERT_TRUE(eventually([&] { return stored().size() >= 5; }, 10s)) << g.describe();
  // 2. faultcp killed: the guard keeps judging and spools.
  cp_.kill9();
  const int before = up.requests();
  ASSERT_TRUE(eventually([&] { return up.requests() >= before + 10; }, 10s)) << g.describe();
  struct stat st {};
  ASSERT_EQ(::stat(dir_.file("state/cp-spool-alice@laptop-7.jsonl").c_str(), &st), 0);
  EXPECT_GT(st.st_size, 0) << "nothing spooled while faultcp was down";
  // 3. faultcp back (the same port and database): the spool is delivered.
  cp_.start();
  stop_loop();
  auto end = g.finish(20s);
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_NE(end.err.find("activity not delivered"), std::string::npos) << end.err;
  EXPECT_TRUE(eventually([&] { return stored().size() == local_lines(dir_.file("act.jsonl")).size(); }, 10s));
  // 4. faultcp down again; a guard run ends with its line spooled; the next
  //    guard of the identity (faultcp back) delivers it with its own.
  ::unlink(dir_.file("STOP").c_str());
  cp_.kill9();
  auto cached =
      fltest::run_command(guard_argv(tls, {"curl", "-sS", "-o", "/dev/null", up.url("/secret/1")}), {.env = env_}, 30s);
  ASSERT_TRUE(cached.status.is(0)) << cached.describe();
  EXPECT_NE(cached.err.find("cached in"), std::string::npos) << cached.err;
  EXPECT_NE(cached.err.find("not delivered yet, kept in"), std::string::npos) << cached.err;
  cp_.start();
  auto next =
      fltest::run_command(guard_argv(tls, {"curl", "-sS", "-o", "/dev/null", up.url("/b")}), {.env = env_}, 30s);
  ASSERT_TRUE(next.status.is(0)) << next.describe();
  EXPECT_NE(next.err.find("1 line from before"), std::string::npos) << next.err;

  const auto local = local_lines(dir_.file("act.jsonl"));
  auto verify = fltest::run_command({kFaultctl, "activity", "verify", dir_.file("act.jsonl")}, {}, 20s);
  EXPECT_TRUE(verify.status.is(0)) << verify.describe();
  json all;
  ASSERT_TRUE(eventually(
      [&] {
        all = stored();
        return all.size() == local.size();
      },
      10s))
      << all.size() << " stored of " << local.size();
  std::set<std::pair<std::string, uint64_t>> seen;
  bool denied = false;
  for (const auto& e : all) {
    const std::pair<std::string, uint64_t> key{e["identity"], e["seq"]};
    EXPECT_TRUE(seen.insert(key).second) << "stored twice: " << e;
    auto it = local.find(key);
    ASSERT_NE(it, local.end()) << "not in the local log: " << e;
    EXPECT_EQ(e["hash"], it->second);
    EXPECT_EQ(e["chain"], "ok") << e;
    denied = denied || e["verdict"] == "deny";
  }
  EXPECT_TRUE(denied) << "the denial made while faultcp was down is missing";
  struct stat spool {};
  EXPECT_TRUE(::stat(dir_.file("state/cp-spool-alice@laptop-7.jsonl").c_str(), &spool) != 0 || spool.st_size == 0);
}

// --- --llm-budget-shared ------------------------------------------------------

// A stand-in model server: POST /v1/messages answered after `delay` with a
// JSON message whose usage is in 10, out 5.
class SlowModel {
 public:
  explicit SlowModel(std::chrono::milliseconds delay) : delay_(delay), server_([this](UniqueFd fd) { serve(fd); }) {}
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + "/v1/messages";
  }
  [[nodiscard]] int requests() const { return requests_.load(); }

 private:
  void serve(const UniqueFd& fd) {
    std::string got;
    char b[16384];
    size_t want = std::string::npos;
    while (want == std::string::npos || got.size() < want) {
      const ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
      if (n <= 0) return;
      got.append(b, size_t(n));
      const size_t end = got.find("\r\n\r\n");
      if (want == std::string::npos && end != std::string::npos) {
        std::string head = got.substr(0, end);
        for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = head.find("content-length: ");
        want = end + 4 + (cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16)));
      }
    }
    requests_.fetch_add(1);
    std::this_thread::sleep_for(delay_);
    const std::string text =
        R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"hi"}],)"
        R"("stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}})";
    fltest::send_all(fd.get(), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                   std::to_string(text.size()) + "\r\nConnection: close\r\n\r\n" + text);
  }
  std::chrono::milliseconds delay_;
  std::atomic<int> requests_{0};
  fltest::ScriptServer server_;
};

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

const std::vector<std::string> kSharedBudget = {
    "--terminate-tls",    "--llm-request-budget", "10", "--llm-token-budget", "1000", "--llm-budget-window", "1d",
    "--llm-budget-shared"};

TEST_F(GuardCpTest, TwoGuardsOfOneIdentityShareOneBudgetTwentyConcurrentCallsAdmitExactlyTen) {
  // Every call in flight at once (the model answers after 1.5 s), so the
  // admission alone decides, and the two guards reserve at faultcp together.
  SlowModel model(1500ms);
  put_policy({{"mode", "enforce"}, {"default_allow", true}, {"rules", json::array()}});
  fltest::wait_clear_of_window_edge(std::chrono::hours(24));
  const std::string go = dir_.file("GO");
  const std::string calls = "while [ ! -e " + go + " ]; do sleep 0.05; done; for i in $(seq 10); do " +
                            "curl -sS -o /dev/null --max-time 30 -w '%{http_code}\\n' --data-binary " +
                            "'{\"model\":\"claude-test\",\"max_tokens\":100,\"messages\":[]}' " + model.url() +
                            " & done; wait";
  auto a = guard(kSharedBudget, {"sh", "-c", calls});
  auto b = guard(kSharedBudget, {"sh", "-c", calls}, "-b");
  for (auto* g : {&a, &b})
    ASSERT_TRUE(g->wait_for("shared by its guards through faultcp", 20s, fltest::Stream::kStderr)) << g->describe();
  std::ofstream(go) << "\n";
  auto ea = a.finish(60s);
  auto eb = b.finish(60s);
  ASSERT_TRUE(ea.status.is(0)) << ea.describe();
  ASSERT_TRUE(eb.status.is(0)) << eb.describe();
  const std::string out = ea.out + eb.out;
  EXPECT_EQ(count_of(out, "200"), 10u) << out;
  EXPECT_EQ(count_of(out, "429"), 10u) << out;
  EXPECT_EQ(model.requests(), 10);
  // Settled at faultcp to what was billed (5 output tokens a call).
  json charge;
  EXPECT_TRUE(eventually(
      [&] {
        charge = cp_.call("GET", "/v1/guardrails/budget?identity=alice%40laptop-7&window_s=86400", session_).body;
        return charge.value("tokens", -1) == 50;
      },
      5s))
      << charge;
  EXPECT_EQ(charge.value("requests", -1), 10) << charge;
  // The denials' reason (in whichever guard the race sent them to).
  EXPECT_NE((ea.err + eb.err).find("LLM request budget exhausted: 10 of 10 calls per 1d used (shared through faultcp)"),
            std::string::npos)
      << ea.err << eb.err;
}

TEST_F(GuardCpTest, TheSharedBudgetFailsClosedWhenFaultcpCannotBeAsked) {
  SlowModel model(0ms);
  put_policy({{"mode", "enforce"}, {"default_allow", true}, {"rules", json::array()}});
  const std::string go = dir_.file("GO");
  auto g = guard(kSharedBudget,
                 {"sh", "-c",
                  "while [ ! -e " + go + " ]; do sleep 0.05; done; curl -sS --max-time 30 -w '[%{http_code}]' " +
                      "--data-binary '{\"model\":\"claude-test\",\"max_tokens\":100}' " + model.url()});
  ASSERT_TRUE(g.wait_for("shared by its guards through faultcp", 20s, fltest::Stream::kStderr)) << g.describe();
  cp_.kill9();
  std::ofstream(go) << "\n";
  auto end = g.finish(60s);
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_NE(end.out.find("[429]"), std::string::npos) << end.out;
  EXPECT_NE(end.out.find("the shared budget (--llm-budget-shared) could not be asked at faultcp"), std::string::npos)
      << end.out;
  EXPECT_EQ(model.requests(), 0);
}

TEST_F(GuardCpTest, TheSharedBudgetFlagIsRefusedWithoutAControlPlane) {
  auto r = fltest::run_command(
      as_user({kFaultctl, "guard", "--llm-request-budget", "5", "--llm-budget-shared", "--", "true"}), {.env = env_},
      20s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--llm-budget-shared needs --control-plane"), std::string::npos) << r.err;
  auto nobudget = fltest::run_command(guard_argv({"--llm-budget-shared"}, {"true"}), {.env = env_}, 20s);
  EXPECT_TRUE(nobudget.status.is(2)) << nobudget.describe();
  EXPECT_NE(nobudget.err.find("--llm-budget-shared applies to --llm-token-budget"), std::string::npos) << nobudget.err;
}

// --- the proctor --------------------------------------------------------------

// A stand-in for the proctor's model (Anthropic Messages API): its answer
// depends on the held request's path in the prompt.
class StandInProctor {
 public:
  StandInProctor() : server_([this](UniqueFd fd) { serve(fd); }) {}
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + "/v1/messages";
  }
  std::vector<std::string> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve(const UniqueFd& fd) {
    std::string got;
    char b[16384];
    size_t want = std::string::npos;
    while (want == std::string::npos || got.size() < want) {
      const ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
      if (n <= 0) return;
      got.append(b, size_t(n));
      const size_t end = got.find("\r\n\r\n");
      if (want == std::string::npos && end != std::string::npos) {
        std::string head = got.substr(0, end);
        for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
        const size_t cl = head.find("content-length: ");
        want = end + 4 + (cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16)));
      }
    }
    {
      std::lock_guard lock(mu_);
      requests_.push_back(got);
    }
    auto text_answer = [&](const std::string& text) {
      const std::string body = json{{"id", "msg_p"},
                                    {"type", "message"},
                                    {"role", "assistant"},
                                    {"model", "claude-proctor-test"},
                                    {"content", {{{"type", "text"}, {"text", text}}}},
                                    {"stop_reason", "end_turn"},
                                    {"usage", {{"input_tokens", 90}, {"output_tokens", 20}}}}
                                   .dump();
      fltest::send_all(fd.get(), "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                                     std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    };
    if (got.find("/approve-me") != std::string::npos) {
      text_answer(R"({"decision":"approve","reason":"reading the docs is what the rule expects"})");
    } else if (got.find("/deny-me") != std::string::npos) {
      text_answer("```json\n{\"decision\": \"deny\", \"reason\": \"an upload of the home folder\"}\n```");
    } else if (got.find("/garbage") != std::string::npos) {
      text_answer("Sure, looks fine to me!");
    } else if (got.find("/error") != std::string::npos) {
      const std::string body = R"({"type":"error","error":{"type":"api_error","message":"overloaded"}})";
      fltest::send_all(fd.get(),
                       "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                       "Content-Length: " +
                           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    } else if (got.find("/slow") != std::string::npos) {
      std::this_thread::sleep_for(3s);  // past the guard's 1 s timeout
      text_answer(R"({"decision":"approve","reason":"late"})");
    } else {
      text_answer(R"({"decision":"escalate","reason":"not sure"})");
    }
  }
  std::mutex mu_;
  std::vector<std::string> requests_;
  fltest::ScriptServer server_;
};

TEST_F(GuardCpTest, TheProctorApprovesOrDeniesHeldRequestsAndEscalatesOnDoubtBadAnswersErrorsAndSlowness) {
  Upstream up;
  StandInProctor proctor;
  put_policy({{"mode", "enforce"},
              {"default_allow", true},
              {"rules",
               {{{"name", "ask"}, {"action", "approve"}, {"host", up.host()}, {"reason", "uploads need a look"}},
                {{"name", "never"}, {"action", "deny"}, {"host", up.host()}, {"path", "/never"}}}}});
  env_.push_back("FAULTLINE_PROCTOR_API_KEY=sk-proctor-test");
  env_.push_back("FAULTLINE_PROCTOR_MODEL=claude-proctor-test");
  env_.push_back("FAULTLINE_PROCTOR_URL=" + proctor.url());
  env_.push_back("FAULTLINE_PROCTOR_TIMEOUT_MS=1000");
  std::string script;
  for (const char* path : {"/never", "/approve-me", "/deny-me", "/garbage", "/error", "/slow"})
    script += std::string("curl -sS --max-time 30 -w '[%{http_code}]\\n' ") + up.url(path) + "; ";
  auto g = guard({"--terminate-tls"}, {"sh", "-c", script});
  auto audited = [&](const std::string& action) {
    size_t n = 0;
    const json exported = cp_.call("GET", "/v1/audit/export", session_).body;
    for (const auto& e : exported.value("entries", json::array()))
      if (e.value("action", "") == action) ++n;
    return n;
  };
  // The three the model cannot decide stay held for a person, who denies them in faultcp.
  const std::vector<std::string> escalated = {"/garbage", "/error", "/slow"};
  for (size_t n = 1; n <= 3; ++n) {
    ASSERT_TRUE(eventually([&] { return audited("guardrail.proctor.escalate") == n; }, 20s)) << [&] {
      std::string actions;
      const json exported = cp_.call("GET", "/v1/audit/export", session_).body;
      for (const auto& e : exported.value("entries", json::array()))
        actions += e.value("action", "") + " " + e.value("object", "") + "\n";
      return actions;
    }() << g.describe();
    std::optional<json> a;
    eventually(
        [&] {
          auto r = cp_.call("GET", "/v1/guardrails/approvals", session_);
          for (const auto& x : r.body.value("approvals", json::array()))
            if (x.value("state", "") == "pending" && x.value("path", "") == escalated[n - 1]) a = x;
          return a.has_value();
        },
        10s);
    ASSERT_TRUE(a) << escalated[n - 1] << " is not pending in faultcp\n" << g.describe();
    auto no = cp_.call("POST", "/v1/guardrails/approvals/" + std::to_string((*a)["id"].get<int64_t>()) + "/deny",
                       session_, {{"reason", "a person said no"}});
    ASSERT_EQ(no.status, 200) << no.body;
  }
  auto end = g.finish(30s);
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  std::vector<std::string> lines;
  std::istringstream in(end.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 6u) << end.out;
  EXPECT_NE(lines[0].find("[403]"), std::string::npos) << "a deny rule is never the proctor's: " << lines[0];
  EXPECT_EQ(lines[1], "upstream saw GET /approve-me HTTP/1.1[200]");
  EXPECT_NE(lines[2].find("denied by the proctor (claude-proctor-test): an upload of the home folder"),
            std::string::npos)
      << lines[2];
  EXPECT_NE(lines[2].find("[403]"), std::string::npos) << lines[2];
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_NE(lines[i].find("denied by a person: a person said no"), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find("[403]"), std::string::npos) << lines[i];
  }
  EXPECT_EQ(up.requests(), 1);
  EXPECT_EQ(audited("guardrail.proctor.approve"), 1u);
  EXPECT_EQ(audited("guardrail.proctor.deny"), 1u);
  EXPECT_EQ(audited("guardrail.proctor.escalate"), 3u);
  // What the proctor decided is withdrawn from faultcp (not left pending).
  EXPECT_TRUE(eventually(
      [&] {
        for (const auto& x :
             cp_.call("GET", "/v1/guardrails/approvals", session_).body.value("approvals", json::array()))
          if (x.value("state", "") == "pending") return false;
        return true;
      },
      5s));
  // The model was asked about the five held requests only, with the key and the Messages API's headers.
  const auto asked = proctor.requests();
  ASSERT_EQ(asked.size(), 5u);
  for (const auto& r : asked) {
    EXPECT_NE(r.find("x-api-key: sk-proctor-test"), std::string::npos) << r;
    EXPECT_NE(r.find("anthropic-version: 2023-06-01"), std::string::npos) << r;
    EXPECT_NE(r.find("\"model\":\"claude-proctor-test\""), std::string::npos) << r;
    EXPECT_EQ(r.find("/never"), std::string::npos) << r;
  }
  EXPECT_NE(end.err.find("the proctor (claude-proctor-test) says escalate (the proctor's model answered HTTP 500)"),
            std::string::npos)
      << end.err;
}

TEST_F(GuardCpTest, AProctorWithoutItsModelIsRefusedNamingTheVariable) {
  env_.push_back("FAULTLINE_PROCTOR_API_KEY=sk-x");
  auto r = fltest::run_command(guard_argv({}, {"true"}), {.env = env_}, 20s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("FAULTLINE_PROCTOR_MODEL"), std::string::npos) << r.err;
}

}  // namespace
