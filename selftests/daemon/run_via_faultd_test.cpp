// `faultctl run` through faultd (POST /v1/runs) and standalone: the same
// output and exit codes, bad input and a guardrail breach included; the fault
// ends when faultctl is interrupted or killed, another faultctl sees and ends
// it, and a faultd that stops leaves it on in the kernel until its expiry.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "faultd_env.h"
#include "loader/bpffs.h"
#include "loader/netfault_attachments.h"
#include "selftests/lib/netns_pair.h"

namespace fldaemon {
namespace {

constexpr const char* kRunA = "198.18.11.1";
constexpr const char* kRunB = "198.18.11.2";

class RunViaFaultdTest : public FaultdTest {
 protected:
  void SetUp() override {
    FaultdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    try {
      net_ = std::make_unique<fltest::NetnsPair>(
          "flr-" + std::to_string(::getpid()), fltest::VethEnd{"fra", {std::string(kRunA) + "/24"}},
          fltest::VethEnd{"frb", {std::string(kRunB) + "/24"}}, fltest::NetnsOptions{.ipv6 = false});
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
  }
  // faultd and what it kept attached go before the namespaces.
  void TearDown() override {
    FaultdTest::TearDown();
    net_.reset();
  }

  // `faultctl run ARGS` with or without faultd, to its end.
  [[nodiscard]] CommandResult run(const std::vector<std::string>& args, bool through_faultd) const {
    std::vector<std::string> argv = {FAULTCTL_PATH, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return fltest::run_command(argv, {.env = through_faultd ? env() : standalone_env()}, 60s);
  }
  [[nodiscard]] ChildProcess spawn_run(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {FAULTCTL_PATH, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    return ChildProcess::spawn(argv, {.env = env(), .stop_grace = 5000ms});
  }
  [[nodiscard]] size_t runs_served(size_t at_least = 0) { return served("POST /v1/runs", at_least); }
  [[nodiscard]] size_t faults_on() const {
    const CommandResult st = fltest::run_command({FAULTCTL_PATH, "status", "--json"}, {.env = standalone_env()}, 30s);
    const auto j = nlohmann::json::parse(st.out, nullptr, false);
    return j.is_object() && j.contains("faults") ? j["faults"].size() : 0;
  }
  [[nodiscard]] const std::string& ns() const { return net_->a(); }

 private:
  std::unique_ptr<fltest::NetnsPair> net_;
};

// Numbers (fault IDs, seeds, counters, seconds left) differ between two runs;
// the words around them must not.
std::string shape(const std::string& s) { return std::regex_replace(s, std::regex("[0-9]+"), "N"); }

// The "started" line of a --json run.
std::optional<nlohmann::json> started(ChildProcess& p) {
  auto line =
      p.wait_line([](const std::string& l) { return l.find("\"event\":\"started\"") != std::string::npos; }, 20s);
  if (!line) return std::nullopt;
  return nlohmann::json::parse(*line, nullptr, false);
}

TEST_F(RunViaFaultdTest, TheSameRunPrintsTheSameBothWays) {
  start_faultd();
  const std::vector<std::vector<std::string>> runs = {
      {"partition", "--netns", ns(), "--target", kRunB, "--duration", "1s"},
      {"loss", "--netns", ns(), "--target", kRunB, "--percent", "50", "--seed", "7", "--duration", "1s", "--json"},
  };
  for (const auto& args : runs) {
    const size_t before = runs_served();
    const CommandResult via = run(args, true);
    const CommandResult alone = run(args, false);
    EXPECT_EQ(runs_served(before + 1), before + 1) << "the run did not go through faultd: " << faultd().err();
    EXPECT_TRUE(via.status.is(0)) << via.describe();
    EXPECT_EQ(via.status.code, alone.status.code) << via.describe() << "\n---\n" << alone.describe();
    EXPECT_EQ(shape(via.out), shape(alone.out)) << via.describe() << "\n---\n" << alone.describe();
    EXPECT_EQ(shape(via.err), shape(alone.err)) << via.describe() << "\n---\n" << alone.describe();
  }
  EXPECT_EQ(faults_on(), 0u);
}

TEST_F(RunViaFaultdTest, BadInputExitsTwoBothWays) {
  start_faultd();
  // Refused by the parser before anything is sent, and by the plan in faultd
  // (a namespace that does not exist): exit 2, the same words, nothing applied.
  const std::vector<std::vector<std::string>> bad = {
      {"loss", "--target", kRunB, "--percent", "300", "--duration", "1s"},
      {"partition", "--netns", "fltest-no-such-netns", "--target", kRunB, "--duration", "1s"},
  };
  for (const auto& args : bad) {
    const CommandResult via = run(args, true);
    const CommandResult alone = run(args, false);
    EXPECT_TRUE(via.status.is(2)) << via.describe();
    EXPECT_TRUE(alone.status.is(2)) << alone.describe();
    EXPECT_EQ(via.out, alone.out);
    EXPECT_EQ(via.err, alone.err);
  }
  EXPECT_EQ(served("POST /v1/runs"), 1u) << "the plan's refusal comes from faultd: " << faultd().err();
  EXPECT_EQ(faults_on(), 0u);
}

// The request is the typed experiment: a bad value sent to the API as JSON is
// refused (400) by the packet family's reader, naming the field and the flag
// that spells it, and nothing is applied.
TEST_F(RunViaFaultdTest, ABadExperimentIsRefusedNamingItsFieldAndFlag) {
  start_faultd();
  auto post = [&](const nlohmann::json& body) {
    const std::string b = body.dump();
    const std::string raw = raw_exchange("POST /v1/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
                                         std::to_string(b.size()) + "\r\n\r\n" + b);
    const auto at = raw.find("\r\n\r\n");
    const auto reply = nlohmann::json::parse(at == std::string::npos ? "" : raw.substr(at + 4), nullptr, false);
    return std::make_pair(status_of(raw), reply.is_object() ? reply.value("error", "") : std::string());
  };
  const nlohmann::json good = {
      {"kind", "loss"}, {"netns", ns()}, {"target", kRunB}, {"percent", 30}, {"duration_sec", 1}};
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* said;  // the start of the error
  };
  const std::vector<Case> cases = {
      {"percent", 300, "spec.percent (--percent): '300' is outside 0-100"},
      {"proto", "sctp", "spec.proto (--proto): 'sctp': expected tcp, udp or icmp"},
      {"direction", "sideways", "spec.direction (--direction): 'sideways': expected egress, ingress or both"},
      {"port", "9-1", "spec.port (--port): "},
      {"max_injections", 0, "spec.max_injections (--max-injections): 0: expected a whole number from 1 to 1000000000"},
      {"start_after_ms", 5000, "spec.start_after_ms (--start-after): "},
      {"seed", "x", "spec.seed (--seed): 'x': expected a whole number"},
      {"loss_model", "ge:0", "spec.loss_model (--loss-model): "},
      {"rate_bps", 1000, "spec.rate_bps (--rate): "},
      {"source", "10.0.0.300", "spec.source (--source): "},
      {"interval_ms", 50, "spec.interval_ms (--interval): "},
      {"interval", "50ms", "spec.interval (--interval): '50ms': must be within 100ms-10m"},
  };
  for (const auto& c : cases) {
    nlohmann::json spec = good;
    spec[c.field] = c.value;
    if (std::string(c.field).rfind("interval", 0) == 0) spec["health_url"] = "http://127.0.0.1:9/";
    const auto [status, error] = post({{"experiment", spec}});
    EXPECT_EQ(status, 400) << spec.dump() << ": " << error;
    EXPECT_EQ(error.rfind(c.said, 0), 0u) << spec.dump() << ": " << error;
  }
  const auto [status, error] = post({{"experiment", good}, {"attach", "xdp"}});
  EXPECT_EQ(status, 400) << error;
  EXPECT_NE(error.find("--attach"), std::string::npos) << error;
  EXPECT_EQ(served("run"), 0u) << "a refused request started a run: " << faultd().err();
  EXPECT_EQ(faults_on(), 0u);
}

TEST_F(RunViaFaultdTest, AGuardrailBreachExitsSevenBothWays) {
  start_faultd();
  // The health URL is behind the partition: the probe times out, the fault ends.
  const std::string url = std::string("http://") + kRunB + ":9/health";
  const std::vector<std::string> args = {"partition", "--netns",    ns(),    "--target",
                                         kRunB,       "--duration", "20s",   "--health-url",
                                         url,         "--interval", "300ms", "--health-max-latency",
                                         "300ms"};
  const CommandResult via = run(args, true);
  const CommandResult alone = run(args, false);
  EXPECT_TRUE(via.status.is(7)) << via.describe();
  EXPECT_TRUE(alone.status.is(7)) << alone.describe();
  EXPECT_EQ(shape(via.out), shape(alone.out)) << via.describe() << "\n---\n" << alone.describe();
  EXPECT_EQ(shape(via.err), shape(alone.err)) << via.describe() << "\n---\n" << alone.describe();
  EXPECT_NE(via.err.find("guardrail breached, fault ended"), std::string::npos) << via.describe();
  EXPECT_EQ(runs_served(1), 1u) << faultd().err();
  EXPECT_EQ(faults_on(), 0u);
}

TEST_F(RunViaFaultdTest, CtrlCOrAKilledFaultctlEndsTheFault) {
  start_faultd();
  const std::vector<std::string> args = {"partition", "--netns",    ns(),  "--target",
                                         kRunB,       "--duration", "60s", "--json"};
  ChildProcess interrupted = spawn_run(args);
  ASSERT_TRUE(started(interrupted)) << interrupted.describe() << faultd().err();
  EXPECT_EQ(faults_on(), 1u);
  interrupted.signal(SIGINT);
  auto st = interrupted.wait(10s);
  ASSERT_TRUE(st) << interrupted.describe();
  EXPECT_TRUE(st->is(1)) << interrupted.describe();
  EXPECT_NE(interrupted.out().find("\"reason\":\"interrupted\""), std::string::npos) << interrupted.describe();
  EXPECT_NE(interrupted.out().find("by SIGINT"), std::string::npos) << interrupted.describe();
  EXPECT_EQ(faults_on(), 0u);

  // Killed outright: its connection closes, and faultd ends the fault (SIGHUP).
  ChildProcess killed = spawn_run(args);
  ASSERT_TRUE(started(killed)) << killed.describe();
  EXPECT_EQ(faults_on(), 1u);
  killed.kill_and_reap();
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = faults_on() == 0;
    if (!gone) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(gone) << "the fault outlived its faultctl: " << faultd().err();
  EXPECT_EQ(runs_served(2), 2u) << faultd().err();
}

TEST_F(RunViaFaultdTest, AnotherFaultctlSeesAndAbortsIt) {
  start_faultd();
  ChildProcess r = spawn_run({"partition", "--netns", ns(), "--target", kRunB, "--duration", "60s", "--json"});
  auto s = started(r);
  ASSERT_TRUE(s && s->contains("id")) << r.describe() << faultd().err();
  const std::string id = std::to_string((*s)["id"].get<int>());
  const CommandResult st = fltest::run_command({FAULTCTL_PATH, "status", "--json"}, {.env = env()}, 30s);
  EXPECT_NE(st.out.find("\"id\":" + id), std::string::npos) << st.describe();
  const CommandResult ab = fltest::run_command({FAULTCTL_PATH, "abort", id}, {.env = env()}, 30s);
  EXPECT_TRUE(ab.status.is(0)) << ab.describe();
  auto end = r.wait(10s);
  ASSERT_TRUE(end) << r.describe();
  EXPECT_TRUE(end->is(1)) << r.describe();
  EXPECT_NE(r.out().find("\"reason\":\"aborted\""), std::string::npos) << r.describe();
  EXPECT_EQ(faults_on(), 0u);
}

TEST_F(RunViaFaultdTest, AFaultdThatStopsLeavesTheFaultToItsExpiry) {
  start_faultd();
  ChildProcess r = spawn_run({"partition", "--netns", ns(), "--target", kRunB, "--duration", "4s", "--json"});
  ASSERT_TRUE(started(r)) << r.describe() << faultd().err();
  faultd().stop(5000ms);
  auto end = r.wait(10s);
  ASSERT_TRUE(end) << r.describe();
  EXPECT_TRUE(end->is(1)) << r.describe();
  EXPECT_NE(r.err().find("faultd stopped while fault"), std::string::npos) << r.describe();
  EXPECT_NE(r.err().find("stays on in the kernel until it expires"), std::string::npos) << r.describe();
  EXPECT_EQ(faults_on(), 1u) << "a faultd that stops must not end a fault";
  // Past its expiry the kernel ignores it and the next faultctl reaps it.
  std::this_thread::sleep_for(4500ms);
  EXPECT_EQ(faults_on(), 0u);
}

// The pinned links under the state's root, by name, with their inodes: a link
// pinned anew (a new attachment) has a new inode.
std::map<std::string, ino_t> pinned_links(const std::string& root) {
  std::map<std::string, ino_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root + "/links", ec)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) out[e.path().filename().string()] = st.st_ino;
  }
  return out;
}

TEST_F(RunViaFaultdTest, FaultdKeepsWhatItsRunsAttachedUntilItStops) {
  start_faultd();
  const std::vector<std::string> args = {"partition", "--netns", ns(), "--target", kRunB, "--duration", "1s"};
  const CommandResult first = run(args, true);
  ASSERT_TRUE(first.status.is(0)) << first.describe();
  const auto kept = pinned_links(bpffs_root());
  EXPECT_FALSE(kept.empty()) << "faultd gave up the attachment of its run when the fault ended";
  const CommandResult second = run(args, true);
  EXPECT_TRUE(second.status.is(0)) << second.describe();
  EXPECT_EQ(pinned_links(bpffs_root()), kept) << "the second run attached anew";
  // The kept state takes what a torn-down one would: another attach mode.
  std::vector<std::string> tc = args;
  tc.insert(tc.end(), {"--attach", "tc"});
  const CommandResult other_mode = run(tc, true);
  EXPECT_TRUE(other_mode.status.is(0)) << other_mode.describe();
  EXPECT_NE(other_mode.out.find("via tc"), std::string::npos) << other_mode.describe();
  EXPECT_EQ(runs_served(3), 3u) << faultd().err();
  // Stopped, faultd tears the idle state down, as any faultctl would.
  faultd().stop(5000ms);
  EXPECT_TRUE(pinned_links(bpffs_root()).empty());
  EXPECT_FALSE(std::filesystem::exists(bpffs_root() + "/maps/fl_attach"));
}

// faultd loads and verifies the programs of its own namespace at its start: a
// run there attaches those (no second load), bound to the state's maps.
TEST_F(RunViaFaultdTest, FaultdLoadsItsNamespacesProgramsAtItsStart) {
  start_faultd_in(ns());
  ASSERT_NE(faultd().err().find("packet programs loaded and verified ahead of the first run"), std::string::npos)
      << faultd().err();
  const faultline::BpffsLayout layout{bpffs_root()};
  const auto control = faultline::pinned_control_map_id(layout);
  ASSERT_TRUE(control) << "faultd made no maps at its start";
  EXPECT_EQ(faultline::count_netfault_progs(*control), 2) << "egress and ingress, loaded before any run";
  // A run in faultd's namespace (no --netns): planned in faultd, so there.
  const CommandResult r = run({"partition", "--target", kRunB, "--duration", "1s"}, true);
  ASSERT_TRUE(r.status.is(0)) << r.describe() << faultd().err();
  EXPECT_EQ(runs_served(1), 1u) << faultd().err();
  EXPECT_EQ(faultline::count_netfault_progs(*control), 2) << "the run loaded the programs again";
  EXPECT_FALSE(pinned_links(bpffs_root()).empty()) << r.describe();
  faultd().stop(5000ms);
  EXPECT_TRUE(pinned_links(bpffs_root()).empty());
  EXPECT_FALSE(std::filesystem::exists(bpffs_root() + "/maps/fl_attach"));
}

}  // namespace
}  // namespace fldaemon
