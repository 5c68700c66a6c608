// faultd as an agent of a real faultcp (the binaries, on SQLite and on
// PostgreSQL): it enrolls, runs a dispatched partition on a veth of a test
// namespace (the packets really stop), reports the record, ends the fault
// within a second of the kill switch, and reconciles after kill -9 of either
// side without running anything twice. HTTPS to faultcp with a private CA.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include "cp_client.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/loopback_port.h"
#include "selftests/lib/netns_pair.h"
#include "selftests/lib/require_root.h"
#include "selftests/lib/test_bpffs.h"
#include "selftests/lib/test_cert.h"
#include "selftests/lib/test_cgroup.h"
#include "userspace/policy/policy_apply.h"

namespace {

using fltest::Backend;
using fltest::ChildProcess;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Polls pred every 50 ms until it holds or the deadline passes.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds within) {
  const auto end = Clock::now() + within;
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

class AgentTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    FL_REQUIRE_ROOT("faultd runs packet faults (BPF, a test namespace)");
    char tmpl[] = "/tmp/fl-agent-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    tag_ = std::to_string(::getpid() % 100000) + std::to_string(++counter_);
    bpffs_root_ = "/sys/fs/bpf/fltest-agent-" + tag_;
    db_.emplace(GetParam());
    port_ = fltest::free_loopback_port();
    ASSERT_NE(port_, 0);
    start_faultcp();
    auto signup = call("POST", "/v1/auth/signup", "",
                       R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})");
    ASSERT_EQ(signup.status, 201) << signup.describe();
    session_ = signup.json().value("token", "");
    auto enr = call("POST", "/v1/tokens", session_, R"({"kind":"enrollment","name":"fleet"})");
    ASSERT_EQ(enr.status, 201) << enr.describe();
    enroll_ = enr.json().value("token", "");
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (faultd_) faultd_->stop(5000ms);
    faultd_.reset();
    if (faultcp_) faultcp_->stop(5000ms);
    faultcp_.reset();
    if (std::filesystem::exists(bpffs_root_)) {
      (void)fltest::run_command({FAULTCTL_PATH, "policy", "delete"}, {.env = env()}, 30s);
      (void)fltest::run_command({FAULTCTL_PATH, "uninstall"}, {.env = env()}, 30s);
    }
    fltest::remove_test_bpffs_root(bpffs_root_);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  [[nodiscard]] std::vector<std::string> env() const {
    return {"FAULTLINE_BPFFS_ROOT=" + bpffs_root_, "FAULTLINE_RUN_DIR=" + dir_ + "/run",
            "FAULTLINE_FAULTD_SOCKET=" + dir_ + "/faultd.sock", "FAULTLINE_ENROLL_TOKEN="};
  }

  void start_faultcp() {
    faultcp_.emplace(ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:" + std::to_string(port_),
                                          "--database", db_->url(), "--lease-ms", "10000"},
                                         {.output = fltest::Output::kFiles}));
    ASSERT_TRUE(faultcp_->wait_for("faultcp: listening on", 30s, fltest::Stream::kEither)) << faultcp_->describe();
  }

  void start_faultd(bool with_token = true, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {
        FAULTD_PATH, "--foreground", "--socket", dir_ + "/faultd.sock", "--metrics",
        "off",       "--toxiproxy",  "off",      "--control-plane",     "http://127.0.0.1:" + std::to_string(port_)};
    if (with_token) argv.insert(argv.end(), {"--enroll-token", enroll_});
    argv.insert(argv.end(), extra.begin(), extra.end());
    faultd_.emplace(ChildProcess::spawn(argv, {.env = env(), .output = fltest::Output::kFiles, .stop_grace = 5000ms}));
    ASSERT_TRUE(faultd_->wait_for("faultd: serving:", 30s, fltest::Stream::kStderr)) << faultd_->describe();
  }

  [[nodiscard]] fltest::CpReply call(const std::string& method, const std::string& path, const std::string& token,
                                     const std::string& body = "") const {
    return fltest::cp_request(port_, method, path, token, body, 10'000);
  }

  // The one agent of the workspace, once registered.
  int64_t wait_agent() {
    int64_t id = 0;
    eventually(
        [&] {
          auto list = call("GET", "/v1/agents", session_).json();
          if (!list.contains("agents") || list["agents"].empty()) return false;
          id = list["agents"][0].value("id", int64_t{0});
          return true;
        },
        15s);
    return id;
  }

  nlohmann::json experiment(int64_t id) {
    return call("GET", "/v1/experiments/" + std::to_string(id), session_).json();
  }

  std::string wait_state(int64_t id, const std::vector<std::string>& states, std::chrono::milliseconds within) {
    std::string state;
    eventually(
        [&] {
          state = experiment(id).value("status", experiment(id).value("state", ""));
          return std::find(states.begin(), states.end(), state) != states.end();
        },
        within);
    return state;
  }

  // Partition toward the far end of the test pair, on the near end's veth.
  int64_t submit(int64_t agent, const fltest::NetnsPair& pair, const std::string& far_ip, int duration_sec) {
    nlohmann::json body{{"agent_id", agent},
                        {"spec",
                         {{"kind", "partition"},
                          {"target", far_ip},
                          {"netns", pair.a()},
                          {"dev", "fla" + tag_},
                          {"duration_sec", duration_sec}}}};
    auto r = call("POST", "/v1/experiments", session_, body.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("id", int64_t{0});
  }

  // One ping from the near namespace: true if it was answered.
  bool reaches(const fltest::NetnsPair& pair, const std::string& ip) const {
    auto r = fltest::run_command({"ip", "netns", "exec", pair.a(), "ping", "-c", "1", "-W", "1", ip}, {}, 5s);
    return r.status.is(0);
  }

  // faultctl status --json in our private state: the packet faults on now.
  size_t faults_on() const {
    auto r = fltest::run_command({FAULTCTL_PATH, "status", "--json"}, {.env = env()}, 10s);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_discarded() || !j.contains("faults")) return 0;
    return j["faults"].size();
  }

  std::unique_ptr<fltest::NetnsPair> pair(const std::string& near_ip, const std::string& far_ip) {
    return std::make_unique<fltest::NetnsPair>("flag" + tag_, fltest::VethEnd{"fla" + tag_, {near_ip + "/24"}},
                                               fltest::VethEnd{"flb" + tag_, {far_ip + "/24"}},
                                               fltest::NetnsOptions{.ipv6 = false});
  }

  static inline int counter_ = 0;
  std::string dir_, tag_, bpffs_root_, session_, enroll_;
  std::optional<fltest::TestDatabase> db_;
  uint16_t port_ = 0;
  std::optional<ChildProcess> faultcp_, faultd_;
};

TEST_P(AgentTest, EnrollsRunsADispatchedPartitionAndReportsTheRecord) {
  auto p = pair("198.18.71.1", "198.18.71.2");
  ASSERT_TRUE(reaches(*p, "198.18.71.2")) << "the test pair does not pass traffic before any fault";
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  auto a = call("GET", "/v1/agents/" + std::to_string(agent), session_).json();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(a.value("hostname", ""), host) << a.dump();
  EXPECT_FALSE(a.value("kernel", "").empty()) << a.dump();
  // The token is kept in a root-only file of faultd's state.
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/run/cp-agent.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  const int64_t id = submit(agent, *p, "198.18.71.2", 4);
  ASSERT_EQ(wait_state(id, {"running"}, 10s), "running") << experiment(id).dump() << faultd_->describe();
  EXPECT_TRUE(eventually([&] { return !reaches(*p, "198.18.71.2"); }, 3s)) << "the partition is not in effect";
  ASSERT_EQ(wait_state(id, {"completed", "failed", "aborted-by-slo"}, 15s), "completed")
      << experiment(id).dump() << faultd_->describe();
  const auto e = experiment(id);
  const auto& rec = e["record"];
  EXPECT_EQ(rec.value("outcome", ""), "completed") << e.dump();
  EXPECT_EQ(rec.value("exit_code", -1), 0) << e.dump();
  ASSERT_TRUE(rec.contains("ended")) << e.dump();
  EXPECT_GT(rec["ended"]["counters"].value("dropped", 0), 0) << "no packet was dropped: " << e.dump();
  EXPECT_TRUE(reaches(*p, "198.18.71.2")) << "the partition outlived its experiment";
  EXPECT_EQ(faults_on(), 0u);
  // faultd spoke protobuf on every agent route: registration, polls, events.
  const std::string m = call("GET", "/metrics", session_).body;
  EXPECT_NE(m.find("faultcp_agent_requests_total{format=\"json\"} 0\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("faultcp_agent_requests_total{format=\"protobuf\"} 0\n"), std::string::npos) << m;
}

TEST_P(AgentTest, TheKillSwitchEndsTheFaultWithinOneSecond) {
  auto p = pair("198.18.72.1", "198.18.72.2");
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const int64_t id = submit(agent, *p, "198.18.72.2", 120);
  ASSERT_EQ(wait_state(id, {"running"}, 10s), "running") << experiment(id).dump() << faultd_->describe();
  ASSERT_TRUE(eventually([&] { return faults_on() == 1; }, 3s)) << faultd_->describe();
  ASSERT_FALSE(reaches(*p, "198.18.72.2"));
  const auto t0 = Clock::now();
  auto k = call("POST", "/v1/kill", session_);
  ASSERT_EQ(k.status, 200) << k.describe();
  ASSERT_TRUE(eventually([&] { return faults_on() == 0; }, 5s)) << faultd_->describe();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::cout << "kill switch to fault gone: " << ms << " ms (" << fltest::backend_name(GetParam()) << ")\n";
  EXPECT_LE(ms, 1000) << "the kill switch took over a second to end the fault";
  EXPECT_TRUE(reaches(*p, "198.18.72.2"));
  // The stop is confirmed with the run's record; the experiment stays cancelled.
  EXPECT_TRUE(eventually([&] { return experiment(id).contains("record") && !experiment(id)["record"].is_null(); }, 5s))
      << experiment(id).dump();
  EXPECT_EQ(experiment(id).value("status", ""), "cancelled") << experiment(id).dump();
  // While engaged nothing new starts; released, work flows again.
  EXPECT_EQ(call("DELETE", "/v1/kill", session_).status, 200);
  const int64_t next = submit(agent, *p, "198.18.72.2", 1);
  EXPECT_EQ(wait_state(next, {"completed", "failed"}, 15s), "completed") << experiment(next).dump();
}

TEST_P(AgentTest, Kill9OfFaultdMidRunEndsTheFaultAtRestartAndNeverRunsItAgain) {
  auto p = pair("198.18.73.1", "198.18.73.2");
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const int64_t id = submit(agent, *p, "198.18.73.2", 120);
  ASSERT_EQ(wait_state(id, {"running"}, 10s), "running") << faultd_->describe();
  ASSERT_TRUE(eventually([&] { return faults_on() == 1; }, 3s)) << faultd_->describe();
  faultd_->kill_and_reap();
  // The fault is in pinned maps: it outlives the process (to its deadline).
  EXPECT_FALSE(reaches(*p, "198.18.73.2"));
  EXPECT_EQ(faults_on(), 1u);
  start_faultd(/*with_token=*/false);  // registered already: the state file has its token
  EXPECT_EQ(wait_state(id, {"failed", "completed"}, 10s), "failed") << experiment(id).dump() << faultd_->describe();
  EXPECT_NE(experiment(id).value("detail", "").find("not run again"), std::string::npos) << experiment(id).dump();
  EXPECT_EQ(faults_on(), 0u) << "the fault of the killed run is still on";
  EXPECT_TRUE(reaches(*p, "198.18.73.2"));
  // Still the one agent, and the experiment was started once.
  EXPECT_EQ(call("GET", "/v1/agents", session_).json()["agents"].size(), 1u);
  EXPECT_EQ(faultd_->err().find("experiment " + std::to_string(id) + " starts"), std::string::npos)
      << faultd_->describe();
}

TEST_P(AgentTest, Kill9OfFaultcpMidRunIsReconciledFromTheAgent) {
  auto p = pair("198.18.74.1", "198.18.74.2");
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const int64_t id = submit(agent, *p, "198.18.74.2", 3);
  ASSERT_EQ(wait_state(id, {"running"}, 10s), "running") << faultd_->describe();
  faultcp_->kill_and_reap();
  // The run goes on without faultcp and ends on its own.
  EXPECT_TRUE(faultd_->wait_for("experiment " + std::to_string(id) + " completed", 15s, fltest::Stream::kStderr))
      << faultd_->describe();
  EXPECT_EQ(faults_on(), 0u);
  start_faultcp();
  EXPECT_EQ(wait_state(id, {"completed", "failed"}, 15s), "completed") << experiment(id).dump() << faultd_->describe();
  EXPECT_EQ(experiment(id)["record"].value("outcome", ""), "completed") << experiment(id).dump();
}

// A policy bundle from faultcp, on a cgroup of the test's own (a deny of a
// TEST-NET address: nothing of the machine's egress changes): faultd with the
// matching label applies it (live in the kernel under the test's bpffs root),
// replaces it with the next version, keeps it when a version fails on the
// host (reported with the reason), does not re-apply it after a restart, and
// removes it when a version's selector leaves it out.
TEST_P(AgentTest, APolicyFromFaultcpIsAppliedReplacedReportedAndRemovedWhenNotSelected) {
  fltest::TestCgroup cg("flagpol" + tag_);
  start_faultd(true, {"--label", "role=web", "--label", "zone=eu-1"});
  const int64_t agent = wait_agent();
  ASSERT_NE(agent, 0);
  const auto row = [&] { return call("GET", "/v1/agents/" + std::to_string(agent), session_).json(); };
  EXPECT_EQ(row()["labels"], nlohmann::json::parse(R"({"role":"web","zone":"eu-1"})"));
  const faultline::BpffsLayout layout{bpffs_root_};
  auto put = [&](const std::string& name, const std::string& cgroup, const std::string& cidr, const std::string& role) {
    const std::string yaml =
        "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: " + name +
        "}\nspec:\n  egress:\n    - cgroup: " + cgroup +
        "\n      mode: enforce\n      rules:\n        - {name: testnet, action: deny, cidr: " + cidr + "}\n";
    auto r = call("PUT", "/v1/policy", session_,
                  nlohmann::json{{"policy", yaml}, {"selector", {{"labels", {{"role", role}}}}}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("version", int64_t{0});
  };
  auto reported = [&](int64_t version) {
    nlohmann::json a;
    eventually(
        [&] {
          a = row();
          return a["policy_reported_version"] == version;
        },
        15s);
    return a;
  };
  auto live_name = [&]() -> std::string {
    auto live = faultline::read_live_policy(layout);
    if (!live) return "error: " + live.error().describe();
    return *live ? (*live)->policy.name : "";
  };

  const auto t1 = Clock::now();
  const int64_t v1 = put("agent-pol-one", cg.relative(), "192.0.2.1/32", "web");
  auto a = reported(v1);
  std::printf("policy: version %lld applied and reported in %lld ms\n", static_cast<long long>(v1),
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t1).count()));
  EXPECT_EQ(a["policy_status"], "applied") << a << faultd_->describe();
  EXPECT_EQ(a["policy_version"], v1);
  EXPECT_EQ(live_name(), "agent-pol-one");
  auto exported = fltest::run_command({FAULTCTL_PATH, "policy", "export", "--format", "json"}, {.env = env()}, 10s);
  EXPECT_NE(exported.out.find("192.0.2.1"), std::string::npos) << exported.out << exported.err;

  const int64_t v2 = put("agent-pol-two", cg.relative(), "192.0.2.2/32", "web");
  a = reported(v2);
  EXPECT_EQ(a["policy_status"], "applied") << a;
  EXPECT_EQ(a["policy_version"], v2);
  EXPECT_EQ(live_name(), "agent-pol-two");
  auto live = faultline::read_live_policy(layout);
  ASSERT_TRUE(live.ok() && live->has_value());
  EXPECT_EQ((*live)->policy.egress->at(0).rules.at(0).cidr->str(), "192.0.2.2");

  // A cgroup this host does not have: refused on the host, reported, the old policy stays.
  const int64_t v3 = put("agent-pol-bad", "/fl-no-such-" + tag_, "192.0.2.3/32", "web");
  a = reported(v3);
  EXPECT_EQ(a["policy_status"], "failed") << a;
  EXPECT_EQ(a["policy_version"], v2) << a;
  EXPECT_NE(a["policy_detail"].get<std::string>().find("cgroup"), std::string::npos) << a;
  EXPECT_EQ(live_name(), "agent-pol-two");

  // Back to a good version, then a restart of faultd: nothing is applied again.
  const int64_t v4 = put("agent-pol-two", cg.relative(), "192.0.2.2/32", "web");
  ASSERT_EQ(reported(v4)["policy_status"], "applied");
  faultd_->stop(5000ms);
  faultd_.reset();
  start_faultd(false, {"--label", "role=web", "--label", "zone=eu-1"});
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(faultd_->describe().find("policy version"), std::string::npos)
      << "faultd handled a policy again after its restart: " << faultd_->describe();
  EXPECT_EQ(row()["policy_version"], v4);

  // faultctl against the control plane: a dry run names this agent and stores nothing.
  const std::string file = dir_ + "/db.yaml";
  {
    std::ofstream out(file);
    out << "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: agent-pol-db}\nspec:\n  egress:\n"
           "    - cgroup: "
        << cg.relative() << "\n      rules:\n        - {name: testnet, action: deny, cidr: 192.0.2.5/32}\n";
  }
  const std::vector<std::string> cp_flags = {
      FAULTCTL_PATH, "--control-plane", "http://127.0.0.1:" + std::to_string(port_), "--token", session_, "policy"};
  auto ctl = [&](std::vector<std::string> words) {
    std::vector<std::string> argv = cp_flags;
    argv.insert(argv.end(), words.begin(), words.end());
    return fltest::run_command(argv, {.env = env()}, 20s);
  };
  auto dry = ctl({"apply", file, "--dry-run", "--label", "role=web"});
  EXPECT_TRUE(dry.status.is(0)) << dry.describe();
  EXPECT_NE(dry.out.find("dry run: would store version " + std::to_string(v4 + 1)), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("(" + std::to_string(agent) + ")"), std::string::npos) << dry.out;
  EXPECT_EQ(call("GET", "/v1/policy", session_).json()["version"], v4) << "the dry run stored a version";
  auto got = ctl({"get"});
  EXPECT_TRUE(got.status.is(0)) << got.describe();
  EXPECT_NE(got.out.find("agent-pol-two"), std::string::npos) << got.out;
  auto bad = ctl({"put", file, "--label", "role"});
  EXPECT_TRUE(bad.status.is(2)) << bad.describe();

  // A version for other agents (put by faultctl): this one removes what it applied.
  auto put_db = ctl({"put", file, "--label", "role=db"});
  ASSERT_TRUE(put_db.status.is(0)) << put_db.describe();
  const int64_t v5 = v4 + 1;
  EXPECT_NE(put_db.out.find("stored version " + std::to_string(v5)), std::string::npos) << put_db.out;
  a = reported(v5);
  EXPECT_EQ(a["policy_status"], "not-selected") << a;
  EXPECT_TRUE(a["policy_version"].is_null()) << a;
  EXPECT_EQ(live_name(), "") << "the policy of other agents was applied, or the old one left";
  EXPECT_EQ(call("POST", "/v1/audit/verify", session_).json()["ok"], true);
  // Labels, policies and reports went as protobuf (RegisterRequest.labels,
  // NextReply.policy, PolicyStatus): faultd asked for JSON on no agent route.
  const std::string m = call("GET", "/metrics", session_).body;
  EXPECT_NE(m.find("faultcp_agent_requests_total{format=\"json\"} 0\n"), std::string::npos) << m;
}

TEST_P(AgentTest, BadFlagsAreNamedAndNothingStarts) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--control-plane", "ftp://127.0.0.1:1"}, "not an http:// or https:// URL"},
      {{"--enroll-token", enroll_}, "give --control-plane too"},
      {{"--control-plane", "http://127.0.0.1:1"}, "--enroll-token (or FAULTLINE_ENROLL_TOKEN) is needed"},
      {{"--control-plane", "http://127.0.0.1:1", "--enroll-token", "flcp_api_x"}, "not an enrollment token"},
      {{"--control-plane", "http://127.0.0.1:1", "--enroll-token", enroll_, "--control-plane-ca", dir_ + "/none.pem"},
       "--control-plane-ca " + dir_ + "/none.pem: cannot be read"},
      {{"--label", "role=web"}, "--label configures the control-plane agent: give --control-plane too"},
      {{"--control-plane", "http://127.0.0.1:1", "--enroll-token", enroll_, "--label", "role"}, "expected KEY=VALUE"},
      {{"--control-plane", "http://127.0.0.1:1", "--enroll-token", enroll_, "--label", "-x=1"}, "KEY is 1-63"},
      {{"--control-plane", "http://127.0.0.1:1", "--enroll-token", enroll_, "--label", "a=b c"}, "VALUE is 0-63"},
      {{"--control-plane", "http://127.0.0.1:1", "--enroll-token", enroll_, "--label", "a=1", "--label", "a=2"},
       "given twice"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {FAULTD_PATH, "--foreground", "--socket",    dir_ + "/faultd.sock",
                                     "--metrics", "off",          "--toxiproxy", "off"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto r = fltest::run_command(argv, {.env = env()}, 20s);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.describe();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run/cp-agent.json"));
}

// SIGTERM of faultd mid-run: the fault ends, the run is reported failed before
// faultd exits, and faultd exits 0.
TEST_P(AgentTest, SigtermOfFaultdEndsTheRunAndReportsIt) {
  auto p = pair("198.18.76.1", "198.18.76.2");
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const int64_t id = submit(agent, *p, "198.18.76.2", 120);
  ASSERT_EQ(wait_state(id, {"running"}, 10s), "running") << faultd_->describe();
  ASSERT_TRUE(eventually([&] { return faults_on() == 1; }, 3s)) << faultd_->describe();
  faultd_->signal(SIGTERM);
  auto st = faultd_->wait(10s);
  ASSERT_TRUE(st.has_value()) << faultd_->describe();
  EXPECT_TRUE(st->is(0)) << faultd_->describe();
  EXPECT_EQ(faults_on(), 0u);
  EXPECT_TRUE(reaches(*p, "198.18.76.2"));
  const auto e = experiment(id);
  EXPECT_EQ(e.value("status", ""), "failed") << e.dump();
  EXPECT_NE(e.value("detail", "").find("faultd is stopping"), std::string::npos) << e.dump();
}

// faultctl --control-plane: a remote run follows its experiment to the end and
// exits as a local run would; list, watch and abort; refusals named.
TEST_P(AgentTest, FaultctlRunsListsWatchesAndAbortsThroughTheControlPlane) {
  auto p = pair("198.18.75.1", "198.18.75.2");
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  auto api = call("POST", "/v1/tokens", session_, R"({"kind":"api","name":"ci"})");
  ASSERT_EQ(api.status, 201) << api.describe();
  const std::string token = api.json().value("token", "");
  const std::string url = "http://127.0.0.1:" + std::to_string(port_);
  auto faultctl = [&](std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    args.insert(args.begin(), FAULTCTL_PATH);
    auto e = env();
    e.insert(e.end(), extra_env.begin(), extra_env.end());
    return fltest::run_command(args, {.env = e}, 60s);
  };
  const std::vector<std::string> fault = {"run",     "partition", "--target", "198.18.75.2",
                                          "--netns", p->a(),      "--dev",    "fla" + tag_};
  auto with = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };

  // Traffic for the partition to drop while it is on.
  auto pings = ChildProcess::spawn({"ip", "netns", "exec", p->a(), "ping", "-i", "0.2", "-c", "40", "198.18.75.2"},
                                   {.output = fltest::Output::kFiles});
  auto run = faultctl(with(with({"--control-plane", url, "--token", token}, fault),
                           {"--duration", "2s", "--agent", std::to_string(agent)}));
  EXPECT_TRUE(run.status.is(0)) << run.describe();
  EXPECT_NE(run.out.find("submitted to agent " + std::to_string(agent)), std::string::npos) << run.describe();
  EXPECT_NE(run.out.find("ended (completed)"), std::string::npos) << run.describe();
  EXPECT_EQ(run.out.find("\"dropped\":0"), std::string::npos) << "nothing dropped: " << run.describe();
  pings.kill_and_reap();

  // FAULTLINE_CP and FAULTLINE_CP_TOKEN instead of the flags.
  const std::vector<std::string> cp_env = {"FAULTLINE_CP=" + url, "FAULTLINE_CP_TOKEN=" + token};
  auto list = faultctl({"list"}, cp_env);
  EXPECT_TRUE(list.status.is(0)) << list.describe();
  EXPECT_NE(list.out.find("completed"), std::string::npos) << list.describe();
  EXPECT_NE(list.out.find("198.18.75.2"), std::string::npos) << list.describe();

  auto detached = faultctl(with(fault, {"--duration", "60s", "--agent", std::to_string(agent), "--detach"}), cp_env);
  ASSERT_TRUE(detached.status.is(0)) << detached.describe();
  const auto at = detached.out.find("experiment ");
  ASSERT_NE(at, std::string::npos) << detached.describe();
  const std::string id = std::to_string(std::stoll(detached.out.substr(at + 11)));
  ASSERT_EQ(wait_state(std::stoll(id), {"running"}, 10s), "running") << faultd_->describe();
  auto abort = faultctl({"abort", id}, cp_env);
  EXPECT_TRUE(abort.status.is(0)) << abort.describe();
  auto watch = faultctl({"watch", id, "--json"}, cp_env);
  EXPECT_TRUE(watch.status.is(1)) << "an experiment aborted from outside exits 1, as a local run does: "
                                  << watch.describe();
  EXPECT_NE(watch.out.find("\"state\":\"cancelled\""), std::string::npos) << watch.describe();
  EXPECT_TRUE(eventually([&] { return faults_on() == 0; }, 3s));

  // Refusals: a flag a spec cannot carry (here, before anything is sent), a
  // host faultcp does not know (its 404 names the entry), a bad token.
  // (--attach is the host's own: how this host's programs attach.)
  auto attach = faultctl({"run", "loss", "--target", "198.18.75.2", "--percent", "50", "--duration", "2s", "--attach",
                          "tc", "--agent", std::to_string(agent)},
                         cp_env);
  EXPECT_TRUE(attach.status.is(2)) << attach.describe();
  EXPECT_NE(attach.err.find("--attach cannot be sent to the control plane"), std::string::npos) << attach.describe();
  auto nohost = faultctl(with(fault, {"--duration", "2s", "--hostname", "nohost"}), cp_env);
  EXPECT_TRUE(nohost.status.is(2)) << nohost.describe();
  EXPECT_NE(nohost.err.find("selector.hostnames[0]"), std::string::npos) << nohost.describe();
  auto bad = faultctl({"list"}, {"FAULTLINE_CP=" + url, "FAULTLINE_CP_TOKEN=flcp_api_nope"});
  EXPECT_TRUE(bad.status.is(1)) << bad.describe();
  EXPECT_NE(bad.err.find("answered 401"), std::string::npos) << bad.describe();
  auto nocp = faultctl({"watch", id});
  EXPECT_TRUE(nocp.status.is(2)) << nocp.describe();
}

INSTANTIATE_TEST_SUITE_P(Backends, AgentTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

// Syscall and resource experiments through faultcp (issue 14, section 3), on
// SQLite only (the storage of a spec does not depend on its kind; the suite
// above runs both backends): a real faultd runs them under the same guarded
// run as `faultctl run`, and abort and the kill switch undo them.
class AgentKindsTest : public AgentTest {
 protected:
  int64_t submit_spec(int64_t agent, const nlohmann::json& spec) {
    auto r = call("POST", "/v1/experiments", session_, nlohmann::json{{"agent_id", agent}, {"spec", spec}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json().value("id", int64_t{0});
  }
  // fl_probe's "RESULT <label> <answers>" for n connects to 127.0.0.1:port, from the cgroup.
  std::string connects(const fltest::TestCgroup& cg, uint16_t port, int n) const {
    auto r =
        fltest::run_command({FL_PROBE_PATH, "connect", "tcp", "127.0.0.1", std::to_string(port), std::to_string(n)},
                            {.cgroup = cg.path()}, 20s);
    const std::string label = "RESULT tcp 127.0.0.1:" + std::to_string(port) + " ";
    const auto at = r.out.find(label);
    if (at == std::string::npos) return r.describe();
    return r.out.substr(at + label.size(), r.out.find('\n', at) - at - label.size());
  }
  nlohmann::json status() const {
    auto r = fltest::run_command({FAULTCTL_PATH, "status", "--json"}, {.env = env()}, 10s);
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  // Nothing of ours attached to the cgroup any more.
  std::string attached(const fltest::TestCgroup& cg) const {
    return fltest::run_command({"bpftool", "cgroup", "show", cg.path()}, {}, 10s).out;
  }
  // A python3 server on loopback whose script prints "PORT <n>" once it
  // listens; port is "" if it never did.
  struct LoopbackServer {
    ChildProcess process;
    std::string port;
  };
  static LoopbackServer start_loopback_server(const std::string& script) {
    auto process = ChildProcess::spawn({"python3", "-c", script});
    auto line = process.wait_line_starting("PORT ", 10s);
    return {std::move(process), line ? line->substr(5) : ""};
  }
  // A python3 client run in the cgroup that prints one number: it, or -1.
  static int python_number_from(const fltest::TestCgroup& cg, const std::string& script) {
    auto r = fltest::run_command({"python3", "-c", script}, {.cgroup = cg.path()}, 20s);
    return r.status.is(0) ? std::stoi(r.out) : -1;
  }
  // The experiment was aborted by the API: cancelled, with a record that says so.
  void expect_aborted(int64_t id) {
    EXPECT_TRUE(
        eventually([&] { return experiment(id).contains("record") && !experiment(id)["record"].is_null(); }, 5s))
        << experiment(id).dump();
    auto e = experiment(id);
    EXPECT_EQ(e.value("status", ""), "cancelled") << e.dump();
    EXPECT_EQ(e["record"].value("outcome", ""), "aborted") << e.dump();
  }
};

// A loopback listener, so that a connect that fails failed by the fault.
struct Listener {
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 256) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
  int fd = -1;
  uint16_t port = 0;
};

TEST_P(AgentKindsTest, ASyscallErrnoOnACgroupIsSeenThenAbortAndTheKillSwitchRemoveIt) {
  fltest::TestCgroup cg("fltest-agent-sc-" + tag_);
  Listener l;
  ASSERT_NE(l.port, 0);
  ASSERT_EQ(connects(cg, l.port, 3), "ok:3");
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const nlohmann::json spec{{"kind", "syscall"},
                            {"syscall", "connect"},
                            {"errno", "ECONNRESET"},
                            {"cgroup", cg.relative()},
                            {"duration_sec", 120}};
  const int64_t id = submit_spec(agent, spec);
  ASSERT_EQ(wait_state(id, {"running", "failed"}, 10s), "running") << experiment(id).dump() << faultd_->describe();
  EXPECT_TRUE(eventually([&] { return connects(cg, l.port, 5) == "ECONNRESET:5"; }, 5s))
      << connects(cg, l.port, 5) << faultd_->describe();
  EXPECT_TRUE(eventually([&] { return status()["syscall_faults"].size() == 1; }, 3s)) << status().dump();
  // Abort: the fault is gone within a second, the record says so.
  auto a = call("POST", "/v1/experiments/" + std::to_string(id) + "/abort", session_);
  ASSERT_EQ(a.status, 200) << a.describe();
  const auto t0 = Clock::now();
  EXPECT_TRUE(eventually([&] { return connects(cg, l.port, 3) == "ok:3"; }, 5s)) << faultd_->describe();
  EXPECT_LE(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), 1500);
  EXPECT_TRUE(eventually([&] { return experiment(id).contains("record") && !experiment(id)["record"].is_null(); }, 5s))
      << experiment(id).dump();
  auto e = experiment(id);
  EXPECT_EQ(e.value("status", ""), "cancelled") << e.dump();
  EXPECT_EQ(e["record"].value("outcome", ""), "aborted") << e.dump();
  EXPECT_EQ(e["record"].value("exit_code", -1), 1) << e.dump();
  EXPECT_EQ(e["record"]["started"].value("mechanism", ""), "cgroup") << e.dump();
  EXPECT_TRUE(status()["syscall_faults"].empty()) << status().dump();
  EXPECT_EQ(attached(cg).find("fl_"), std::string::npos) << attached(cg);

  // The kill switch ends a second one, and holds the next until released.
  const int64_t second = submit_spec(agent, spec);
  ASSERT_EQ(wait_state(second, {"running", "failed"}, 10s), "running") << experiment(second).dump();
  ASSERT_TRUE(eventually([&] { return connects(cg, l.port, 2) == "ECONNRESET:2"; }, 5s)) << faultd_->describe();
  const auto t1 = Clock::now();
  ASSERT_EQ(call("POST", "/v1/kill", session_).status, 200);
  EXPECT_TRUE(eventually([&] { return connects(cg, l.port, 2) == "ok:2"; }, 5s)) << faultd_->describe();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t1).count();
  std::cout << "kill switch to syscall fault gone: " << ms << " ms\n";
  EXPECT_LE(ms, 1500) << "the kill switch took too long to end the syscall fault";
  EXPECT_TRUE(
      eventually([&] { return experiment(second).contains("record") && !experiment(second)["record"].is_null(); }, 5s));
  EXPECT_EQ(experiment(second).value("status", ""), "cancelled") << experiment(second).dump();
  EXPECT_EQ(call("DELETE", "/v1/kill", session_).status, 200);
  EXPECT_TRUE(status()["syscall_faults"].empty()) << status().dump();
  EXPECT_EQ(attached(cg).find("fl_"), std::string::npos) << attached(cg);

  // A spec this host cannot run is reported failed with the reason, nothing applied.
  const int64_t bad = submit_spec(agent, {{"kind", "syscall"},
                                          {"syscall", "connect"},
                                          {"errno", "EIO"},
                                          {"cgroup", "/fltest-agent-no-such-" + tag_},
                                          {"duration_sec", 5}});
  ASSERT_EQ(wait_state(bad, {"failed", "completed"}, 10s), "failed") << experiment(bad).dump();
  EXPECT_FALSE(experiment(bad).value("detail", "").empty()) << experiment(bad).dump();
  EXPECT_TRUE(status()["syscall_faults"].empty()) << status().dump();
}

TEST_P(AgentKindsTest, AResourceExperimentStartsAndEndsCleanly) {
  fltest::TestCgroup cg("fltest-agent-rs-" + tag_);
  auto sleeper = ChildProcess::spawn({"sleep", "60"}, {.cgroup = cg.path()});
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const nlohmann::json spec{{"kind", "process"}, {"cgroup", cg.path()}, {"action", "freeze"}, {"duration_sec", 2}};
  const int64_t id = submit_spec(agent, spec);
  ASSERT_EQ(wait_state(id, {"running", "failed"}, 10s), "running") << experiment(id).dump() << faultd_->describe();
  EXPECT_TRUE(eventually([&] { return cg.frozen(); }, 3s)) << faultd_->describe();
  ASSERT_EQ(wait_state(id, {"completed", "failed", "aborted-by-slo"}, 15s), "completed")
      << experiment(id).dump() << faultd_->describe();
  auto e = experiment(id);
  EXPECT_EQ(e["record"].value("outcome", ""), "completed") << e.dump();
  EXPECT_EQ(e["record"].value("exit_code", -1), 0) << e.dump();
  EXPECT_EQ(e["record"]["started"]["plan"]["targets"][0].value("method", ""), "cgroup-freeze") << e.dump();
  EXPECT_FALSE(cg.frozen());
  EXPECT_TRUE(status()["resource_faults"].empty()) << status().dump();

  // Aborted mid-run: thawed at once, the record says aborted.
  const int64_t second =
      submit_spec(agent, {{"kind", "process"}, {"cgroup", cg.path()}, {"action", "freeze"}, {"duration_sec", 120}});
  ASSERT_EQ(wait_state(second, {"running", "failed"}, 10s), "running") << experiment(second).dump();
  ASSERT_TRUE(eventually([&] { return cg.frozen(); }, 3s)) << faultd_->describe();
  ASSERT_EQ(call("POST", "/v1/experiments/" + std::to_string(second) + "/abort", session_).status, 200);
  const auto t0 = Clock::now();
  EXPECT_TRUE(eventually([&] { return !cg.frozen(); }, 5s)) << faultd_->describe();
  EXPECT_LE(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count(), 1500);
  EXPECT_TRUE(
      eventually([&] { return experiment(second).contains("record") && !experiment(second)["record"].is_null(); }, 5s));
  EXPECT_EQ(experiment(second)["record"].value("outcome", ""), "aborted") << experiment(second).dump();
  EXPECT_TRUE(eventually([&] { return status()["resource_faults"].empty(); }, 3s)) << status().dump();
  sleeper.kill_and_reap();
}

// A TCP latency toxic on a test cgroup's connections to a loopback echo server:
// the round trips slow down while it runs, and the abort restores them.
TEST_P(AgentKindsTest, ATcpToxicOnACgroupSlowsItsConnectionsUntilAborted) {
  fltest::TestCgroup cg("fltest-agent-tcp-" + tag_);
  const std::string echo =
      "import socket, threading\n"
      "srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "srv.bind(('127.0.0.1', 0)); srv.listen(64); print('PORT', srv.getsockname()[1], flush=True)\n"
      "def echo(c):\n"
      "    with c:\n"
      "        while True:\n"
      "            b = c.recv(4096)\n"
      "            if not b: return\n"
      "            c.sendall(b)\n"
      "while True:\n"
      "    c, _ = srv.accept(); threading.Thread(target=echo, args=(c,), daemon=True).start()\n";
  auto server = start_loopback_server(echo);
  ASSERT_FALSE(server.port.empty()) << server.process.describe();
  const std::string port = server.port;
  // One connection, one timed round trip, from the cgroup: milliseconds, or -1.
  auto rtt = [&] {
    return python_number_from(cg,
                              "import socket, time\n"
                              "t = time.monotonic(); s = socket.create_connection(('127.0.0.1', " +
                                  port +
                                  "), timeout=10)\n"
                                  "s.sendall(b'ping'); got = b''\n"
                                  "while len(got) < 4: got += s.recv(16)\n"
                                  "print(int((time.monotonic() - t) * 1000))\n");
  };
  ASSERT_GE(rtt(), 0);
  ASSERT_LT(rtt(), 300);
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const int64_t id = submit_spec(agent, {{"kind", "tcp"},
                                         {"target", "127.0.0.1:" + port},
                                         {"toxic", {"latency=400ms"}},
                                         {"cgroup", cg.relative()},
                                         {"drain_ms", 0},
                                         {"duration_sec", 120}});
  ASSERT_EQ(wait_state(id, {"running", "failed"}, 10s), "running") << experiment(id).dump() << faultd_->describe();
  int slow = -1;
  EXPECT_TRUE(eventually([&] { return (slow = rtt()) >= 400; }, 5s)) << slow << faultd_->describe();
  EXPECT_TRUE(eventually([&] { return status()["tcp_faults"].size() == 1; }, 3s)) << status().dump();
  ASSERT_EQ(call("POST", "/v1/experiments/" + std::to_string(id) + "/abort", session_).status, 200);
  int fast = -1;
  EXPECT_TRUE(eventually([&] { return (fast = rtt()) >= 0 && fast < 300; }, 5s)) << fast << faultd_->describe();
  expect_aborted(id);
  EXPECT_TRUE(status()["tcp_faults"].empty()) << status().dump();
  EXPECT_EQ(attached(cg).find("fl_"), std::string::npos) << attached(cg);
  server.process.kill_and_reap();
}

// An HTTP status fault on a test cgroup's requests to a loopback HTTP server:
// its requests to /fail answer 503 while it runs (the others pass), and the
// abort restores them, nothing left on the cgroup.
TEST_P(AgentKindsTest, AnHttpStatusFaultOnACgroupIsSeenUntilAborted) {
  fltest::TestCgroup cg("fltest-agent-http-" + tag_);
  const std::string web =
      "import http.server\n"
      "class H(http.server.BaseHTTPRequestHandler):\n"
      "    protocol_version = 'HTTP/1.1'\n"
      "    def do_GET(self):\n"
      "        self.send_response(200); self.send_header('Content-Length', '2'); self.end_headers()\n"
      "        self.wfile.write(b'ok')\n"
      "    def log_message(self, *a): pass\n"
      "srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)\n"
      "print('PORT', srv.server_address[1], flush=True); srv.serve_forever()\n";
  auto server = start_loopback_server(web);
  ASSERT_FALSE(server.port.empty()) << server.process.describe();
  const std::string port = server.port;
  // The status of a GET of `path` from the cgroup (a new connection each), or -1.
  auto get = [&](const std::string& path) {
    return python_number_from(cg,
                              "import http.client\n"
                              "c = http.client.HTTPConnection('127.0.0.1', " +
                                  port +
                                  ", timeout=10)\n"
                                  "c.request('GET', '" +
                                  path + "'); print(c.getresponse().status)\n");
  };
  ASSERT_EQ(get("/fail"), 200);
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const int64_t id = submit_spec(agent, {{"kind", "http"},
                                         {"target", "127.0.0.1:" + port},
                                         {"path", "/fail"},
                                         {"status", 503},
                                         {"body", "injected"},
                                         {"cgroup", cg.relative()},
                                         {"drain_ms", 0},
                                         {"duration_sec", 120}});
  ASSERT_EQ(wait_state(id, {"running", "failed"}, 10s), "running") << experiment(id).dump() << faultd_->describe();
  int failed = -1;
  EXPECT_TRUE(eventually([&] { return (failed = get("/fail")) == 503; }, 5s)) << failed << faultd_->describe();
  EXPECT_EQ(get("/ok"), 200) << "a request the match does not take was faulted";
  ASSERT_EQ(call("POST", "/v1/experiments/" + std::to_string(id) + "/abort", session_).status, 200);
  int back = -1;
  EXPECT_TRUE(eventually([&] { return (back = get("/fail")) == 200; }, 5s)) << back << faultd_->describe();
  expect_aborted(id);
  EXPECT_EQ(attached(cg).find("fl_"), std::string::npos) << attached(cg);
  server.process.kill_and_reap();
}

// faultctl --control-plane run syscall|cpu|tcp|http: the flags become the spec; a flag
// a spec cannot carry is refused by name before anything is sent.
TEST_P(AgentKindsTest, FaultctlRunsSyscallAndResourceFaultsRemotely) {
  fltest::TestCgroup cg("fltest-agent-ctl-" + tag_);
  start_faultd();
  const int64_t agent = wait_agent();
  ASSERT_GT(agent, 0) << faultd_->describe();
  const std::vector<std::string> e = {"FAULTLINE_CP=http://127.0.0.1:" + std::to_string(port_),
                                      "FAULTLINE_CP_TOKEN=" + session_};
  auto faultctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), FAULTCTL_PATH);
    auto en = env();
    en.insert(en.end(), e.begin(), e.end());
    return fltest::run_command(args, {.env = en}, 60s);
  };
  auto sc = faultctl({"run", "syscall", "--syscall", "connect,sendto", "--errno", "ECONNREFUSED", "--percent", "50",
                      "--cgroup", cg.relative(), "--duration", "1s", "--agent", std::to_string(agent), "--json"});
  EXPECT_TRUE(sc.status.is(0)) << sc.describe() << faultd_->describe();
  EXPECT_NE(sc.out.find("\"state\":\"completed\""), std::string::npos) << sc.describe();
  auto cpu = faultctl({"run", "cpu", "--cores", "1", "--load", "20", "--cgroup", cg.relative(), "--duration", "1s",
                       "--agent", std::to_string(agent)});
  EXPECT_TRUE(cpu.status.is(0)) << cpu.describe() << faultd_->describe();
  EXPECT_NE(cpu.out.find("ended (completed)"), std::string::npos) << cpu.describe();
  auto tcp_run = faultctl({"run", "tcp", "--target", "127.0.0.1:9", "--toxic", "latency=200ms,jitter=20ms", "--toxic",
                           "reset_peer=1s", "--direction", "upstream", "--cgroup", cg.relative(), "--duration", "1s",
                           "--agent", std::to_string(agent), "--detach"});
  EXPECT_TRUE(tcp_run.status.is(0)) << tcp_run.describe();
  auto http_run = faultctl({"run", "http", "--target", "127.0.0.1:9", "--path", "/pay", "--status", "503", "--percent",
                            "30", "--header-equals", "X-Tenant=blue", "--cgroup", cg.relative(), "--duration", "1s",
                            "--agent", std::to_string(agent), "--detach"});
  EXPECT_TRUE(http_run.status.is(0)) << http_run.describe();
  auto list = call("GET", "/v1/experiments", session_).json();
  ASSERT_EQ(list["experiments"].size(), 4u) << list.dump();
  int64_t tcp_id = 0, http_id = 0;
  bool seen_sc = false, seen_cpu = false;
  for (const auto& x : list["experiments"]) {
    const auto& s = x["spec"];
    if (s.value("kind", "") == "syscall") {
      seen_sc = true;
      EXPECT_EQ(s.value("syscall", ""), "connect,sendto") << s.dump();
      EXPECT_EQ(s.value("errno", ""), "ECONNREFUSED") << s.dump();
      EXPECT_EQ(s.value("percent", 0.0), 50.0) << s.dump();
      EXPECT_EQ(s.value("cgroup", ""), cg.relative()) << s.dump();
    }
    if (s.value("kind", "") == "tcp") {
      tcp_id = x.value("id", int64_t{0});
      EXPECT_EQ(s["toxic"], nlohmann::json({"latency=200ms,jitter=20ms", "reset_peer=1s"})) << s.dump();
      EXPECT_EQ(s.value("direction", ""), "upstream") << s.dump();
      EXPECT_EQ(s.value("target", ""), "127.0.0.1:9") << s.dump();
    }
    if (s.value("kind", "") == "http") {
      http_id = x.value("id", int64_t{0});
      EXPECT_EQ(s.value("status", 0), 503) << s.dump();
      EXPECT_EQ(s.value("path", ""), "/pay") << s.dump();
      EXPECT_EQ(s.value("percent", 0.0), 30.0) << s.dump();
      EXPECT_EQ(s["header_equals"], nlohmann::json({"x-tenant=blue"})) << s.dump();
      EXPECT_EQ(s.value("cgroup", ""), cg.relative()) << s.dump();
    }
    if (s.value("kind", "") == "cpu") {
      seen_cpu = true;
      EXPECT_EQ(s.value("cores", 0), 1) << s.dump();
      EXPECT_EQ(s.value("load", 0.0), 20.0) << s.dump();
    }
  }
  EXPECT_TRUE(seen_sc && seen_cpu) << list.dump();
  // Refused by name, nothing sent: a wrapped command, --seed, --path.
  auto cmd = faultctl({"run", "syscall", "--syscall", "openat", "--errno", "EIO", "--duration", "2s", "--agent",
                       std::to_string(agent), "--", "cat", "/etc/hostname"});
  EXPECT_TRUE(cmd.status.is(2)) << cmd.describe();
  EXPECT_NE(cmd.err.find("-- COMMAND cannot be sent to the control plane"), std::string::npos) << cmd.describe();
  auto seed = faultctl({"run", "syscall", "--syscall", "connect", "--errno", "EIO", "--percent", "5", "--seed", "7",
                        "--cgroup", cg.relative(), "--duration", "2s", "--agent", std::to_string(agent)});
  EXPECT_TRUE(seed.status.is(2)) << seed.describe();
  EXPECT_NE(seed.err.find("--seed cannot be sent to the control plane"), std::string::npos) << seed.describe();
  auto http = faultctl({"run", "http", "--target", "127.0.0.1:1", "--status", "503", "--duration", "2s", "--agent",
                        std::to_string(agent), "--", "true"});
  EXPECT_TRUE(http.status.is(2)) << http.describe();
  EXPECT_NE(http.err.find("-- COMMAND cannot be sent"), std::string::npos) << http.describe();
  auto http_redact = faultctl({"run", "http", "--target", "127.0.0.1:1", "--status", "503", "--redact-pattern", "tok",
                               "--duration", "2s", "--agent", std::to_string(agent)});
  EXPECT_TRUE(http_redact.status.is(2)) << http_redact.describe();
  EXPECT_NE(http_redact.err.find("--redact-pattern cannot be sent to the control plane"), std::string::npos)
      << http_redact.describe();
  auto tcp = faultctl({"run", "tcp", "--target", "127.0.0.1:1", "--toxic", "latency=1ms", "--duration", "2s", "--agent",
                       std::to_string(agent), "--", "true"});
  EXPECT_TRUE(tcp.status.is(2)) << tcp.describe();
  EXPECT_NE(tcp.err.find("-- COMMAND cannot be sent"), std::string::npos) << tcp.describe();
  EXPECT_EQ(call("GET", "/v1/experiments", session_).json()["experiments"].size(), 4u);
  // The detached tcp and http runs end on their own.
  EXPECT_EQ(wait_state(tcp_id, {"completed", "failed"}, 15s), "completed") << list.dump() << faultd_->describe();
  EXPECT_EQ(wait_state(http_id, {"completed", "failed"}, 15s), "completed") << list.dump() << faultd_->describe();
}

INSTANTIATE_TEST_SUITE_P(Sqlite, AgentKindsTest, ::testing::Values(Backend::Sqlite),
                         [](const auto& info) { return fltest::backend_name(info.param); });

// HTTPS to faultcp: the certificate is verified against --control-plane-ca;
// without it (the system store) the agent does not register.
TEST(AgentTls, RegistersOverHttpsWithThePrivateCaOnly) {
  FL_REQUIRE_ROOT("faultd runs as root");
  char tmpl[] = "/tmp/fl-agent-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, cert = dir + "/cert.pem", key = dir + "/key.pem";
  auto made = fltest::make_self_signed_cert(cert, key, "localhost");
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  const std::string port = std::to_string(fltest::free_loopback_port());
  auto cp = ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:" + port, "--database",
                                 "sqlite:" + dir + "/db/faultcp.db", "--tls-cert", cert, "--tls-key", key},
                                {.output = fltest::Output::kFiles});
  ASSERT_TRUE(cp.wait_for("faultcp: listening on", 30s, fltest::Stream::kEither)) << cp.describe();
  const std::string url = "https://127.0.0.1:" + port;
  auto curl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"curl", "-sS", "--cacert", cert};
    argv.insert(argv.end(), args.begin(), args.end());
    return nlohmann::json::parse(fltest::run_command(argv, {}, 30s).out, nullptr, false);
  };
  const auto session = curl({"-d", R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})",
                             url + "/v1/auth/signup"})
                           .value("token", "");
  const auto enroll =
      curl({"-H", "Authorization: Bearer " + session, "-d", R"({"kind":"enrollment"})", url + "/v1/tokens"})
          .value("token", "");
  ASSERT_FALSE(enroll.empty());
  const std::vector<std::string> env = {
      "FAULTLINE_BPFFS_ROOT=/sys/fs/bpf/fltest-agent-tls-" + std::to_string(::getpid()),
      "FAULTLINE_RUN_DIR=" + dir + "/run"};
  auto agents = [&] {
    auto j = curl({"-H", "Authorization: Bearer " + session, url + "/v1/agents"});
    return j.contains("agents") ? j["agents"].size() : size_t{0};
  };
  {
    // The system trust store does not know this self-signed certificate.
    auto d = ChildProcess::spawn({FAULTD_PATH, "--foreground", "--socket", dir + "/faultd.sock", "--metrics", "off",
                                  "--toxiproxy", "off", "--control-plane", url, "--enroll-token", enroll},
                                 {.env = env, .output = fltest::Output::kFiles, .stop_grace = 5000ms});
    EXPECT_TRUE(d.wait_for("certificate verify failed", 15s, fltest::Stream::kStderr)) << d.describe();
    d.stop(5000ms);
    EXPECT_EQ(agents(), 0u);
  }
  auto d = ChildProcess::spawn(
      {FAULTD_PATH, "--foreground", "--socket", dir + "/faultd.sock", "--metrics", "off", "--toxiproxy", "off",
       "--control-plane", url, "--enroll-token", enroll, "--control-plane-ca", cert},
      {.env = env, .output = fltest::Output::kFiles, .stop_grace = 5000ms});
  EXPECT_TRUE(eventually([&] { return agents() == 1; }, 15s)) << d.describe();
  // faultctl over https with the same private root (FAULTLINE_CP_CA), and without it.
  const std::vector<std::string> cp_env = {"FAULTLINE_CP=" + url, "FAULTLINE_CP_TOKEN=" + session};
  auto with_ca = cp_env;
  with_ca.push_back("FAULTLINE_CP_CA=" + cert);
  auto list = fltest::run_command({FAULTCTL_PATH, "list"}, {.env = with_ca}, 30s);
  EXPECT_TRUE(list.status.is(0)) << list.describe();
  auto untrusted = fltest::run_command({FAULTCTL_PATH, "list"}, {.env = cp_env}, 30s);
  EXPECT_TRUE(untrusted.status.is(1)) << untrusted.describe();
  EXPECT_NE(untrusted.err.find("certificate verify failed"), std::string::npos) << untrusted.describe();
  d.stop(5000ms);
  cp.stop(5000ms);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
