// /metrics with a real packet fault in test-made namespaces: the counters move
// with real traffic, promtool accepts the text, a real Prometheus scrapes it,
// the fault outlives a stop of faultd, and ends through the next faultd's abort.
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "faultd_env.h"
#include "guardrail_env.h"
#include "selftests/lib/netns_pair.h"

namespace fldaemon {
namespace {

std::string scrape(uint16_t port) {
  CommandResult r = fltest::run_command(
      {"curl", "-sS", "--max-time", "5", "http://127.0.0.1:" + std::to_string(port) + "/metrics"}, {}, 10s);
  return r.out;
}

// The sample value of a line "name{labels} value", or -1 if absent.
double sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(FaultdTest, MetricsCountARealFaultAndPrometheusScrapesThem) {
  const std::string pid = std::to_string(::getpid());
  std::unique_ptr<fltest::NetnsPair> net;
  try {
    net = std::make_unique<fltest::NetnsPair>("fld-" + pid, fltest::VethEnd{"fda", {"198.18.9.1/24"}},
                                              fltest::VethEnd{"fdb", {"198.18.9.2/24"}},
                                              fltest::NetnsOptions{.ipv6 = false});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  start_faultd();
  ASSERT_NE(metrics_port(), 0) << faultd().err();

  // Every ICMP packet from a to b is lost: 5 pings, 5 drops.
  ChildProcess run = ChildProcess::spawn({FAULTCTL_PATH, "run", "loss", "--netns", net->a(), "--target", "198.18.9.2",
                                          "--proto", "icmp", "--percent", "100", "--duration", "60s", "--json"},
                                         {.env = env(), .stop_grace = 5000ms});
  auto started =
      run.wait_line([](const std::string& l) { return l.find("\"event\":\"started\"") != std::string::npos; }, 15s);
  ASSERT_TRUE(started) << run.describe();
  const auto id = nlohmann::json::parse(*started)["id"];
  ASSERT_TRUE(id.is_number()) << *started;
  const std::string fault = std::to_string(id.get<int>());
  CommandResult ping = fltest::run_command(
      {"ip", "netns", "exec", net->a(), "ping", "-c", "5", "-i", "0.2", "-W", "1", "198.18.9.2"}, {}, 20s);
  EXPECT_NE(ping.out.find("100% packet loss"), std::string::npos) << ping.describe();

  const std::string text = scrape(metrics_port());
  const std::string labels = "{fault=\"" + fault + "\",kind=\"loss\"}";
  EXPECT_EQ(sample(text, "faultline_packet_fault_dropped_packets_total" + labels), 5) << text;
  EXPECT_GE(sample(text, "faultline_packet_fault_matched_packets_total" + labels), 5) << text;
  EXPECT_EQ(sample(text, "faultline_packet_dropped_packets_total{reason=\"loss\"}"), 5) << text;
  EXPECT_EQ(sample(text, "faultline_armed"), 1) << text;
  EXPECT_EQ(sample(text, "faultline_map_entries{map=\"fl_faults\"}"), 1) << text;
  EXPECT_GT(sample(text, "faultline_map_max_entries{map=\"fl_exact\"}"), 0) << text;
  EXPECT_NE(text.find("# TYPE faultline_packet_fault_dropped_packets_total counter\n"), std::string::npos) << text;

  // promtool's linter: the exposition format and the naming conventions.
  if (flenf::on_path("promtool")) {
    CommandResult lint = fltest::run_command(
        {"sh", "-c",
         "curl -sS http://127.0.0.1:" + std::to_string(metrics_port()) + "/metrics | promtool check metrics"},
        {}, 20s);
    EXPECT_TRUE(lint.status.is(0)) << lint.describe();
  }

  // A real Prometheus scrapes faultd and reads the same counter.
  if (!flenf::on_path("prometheus")) {
    ADD_FAILURE() << "prometheus is not installed (scripts/install-deps.sh installs it)";
  } else {
    flenf::PrometheusServer prom(dir() + "/prometheus", metrics_port());
    ASSERT_TRUE(prom.wait_ready(30s)) << prom.log();
    EXPECT_TRUE(prom.wait_for_value("faultline_packet_fault_dropped_packets_total" + labels, 5, 30s)) << prom.log();
    EXPECT_TRUE(prom.wait_for_value("up{job=\"faultline_test\"}", 1, 10s)) << prom.log();
  }

  // faultctl status with the fault running: the same document through faultd
  // and standalone (but for the seconds left, which tick between the two).
  auto status_doc = [&](bool through) {
    CommandResult r = faultctl({"status", "--json"}, through);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (j.is_object())
      for (auto& f : j["faults"]) f.erase("left_s");
    return j;
  };
  const size_t gets = served("GET /v1/status");
  const nlohmann::json via = status_doc(true);
  EXPECT_EQ(served("GET /v1/status", gets + 1), gets + 1);
  EXPECT_EQ(via, status_doc(false));
  ASSERT_EQ(via["faults"].size(), 1u) << via.dump();
  EXPECT_EQ(via["faults"][0]["counters"]["dropped"], 5) << via.dump();

  // Stopping faultd ends nothing: the fault is still there and still drops.
  faultd().signal(SIGTERM);
  ASSERT_TRUE(faultd().wait(5000ms)) << faultd().describe();
  const nlohmann::json alone = status_doc(false);
  ASSERT_EQ(alone["faults"].size(), 1u) << alone.dump();
  EXPECT_EQ(alone["faults"][0]["active"], true) << alone.dump();
  CommandResult still = fltest::run_command(
      {"ip", "netns", "exec", net->a(), "ping", "-c", "2", "-i", "0.2", "-W", "1", "198.18.9.2"}, {}, 20s);
  EXPECT_NE(still.out.find("100% packet loss"), std::string::npos)
      << "the fault ended with faultd: " << still.describe();
  start_faultd();

  // faultctl abort through (the new) faultd ends the fault; the run says so and exits.
  const size_t before = served("POST");
  CommandResult abort = faultctl({"abort", fault}, true);
  EXPECT_TRUE(abort.status.is(0)) << abort.describe();
  EXPECT_EQ(abort.out, "fault " + fault + " ended\n");
  EXPECT_EQ(served("POST", before + 1), before + 1);
  auto ended = run.wait(15000ms);
  EXPECT_TRUE(ended) << run.describe();
  CommandResult after = fltest::run_command(
      {"ip", "netns", "exec", net->a(), "ping", "-c", "2", "-i", "0.2", "-W", "1", "198.18.9.2"}, {}, 20s);
  EXPECT_TRUE(after.status.is(0)) << "the fault did not end: " << after.describe();
}

// A syscall fault's counters in /metrics, and the kill switch through faultd
// ending it (a wrapped fl_probe: 5 opens fail with EIO while it waits).
TEST_F(FaultdTest, SyscallFaultCountersAndAbortAllThroughFaultd) {
  start_faultd();
  const std::string file = dir() + "/f.txt";
  std::ofstream(file) << "x\n";
  ChildProcess f = ChildProcess::spawn(
      {FAULTCTL_PATH, "run",      "syscall", "--syscall", "openat", "--errno", "EIO",  "--duration", "60s", "--json",
       "--",          PROBE_PATH, "open",    file,        "5",      "wait",    "open", file,         "1",   "hold"},
      {.env = env(), .stdin_pipe = true, .stop_grace = 5000ms});
  ASSERT_TRUE(f.wait_for("WAITING", 30s)) << f.describe();
  // The run registers its session before it lets the command go: once the
  // command runs, status lists the fault.
  const nlohmann::json st = nlohmann::json::parse(faultctl({"status", "--json"}, true).out);
  ASSERT_EQ(st["syscall_faults"].size(), 1u) << st.dump();
  const std::string id = st["syscall_faults"][0]["id"];
  const std::string mechanism = st["syscall_faults"][0]["mechanism"];
  const std::string series =
      "faultline_syscall_fault_calls_total{fault=\"" + id + "\",mechanism=\"" + mechanism + "\",result=\"failed\"}";
  double failed = -1;
  for (int i = 0; i < 50 && failed != 5; ++i) {
    failed = sample(scrape(metrics_port()), series);
    if (failed != 5) std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(failed, 5) << scrape(metrics_port());

  const CommandResult all = faultctl({"abort", "--all"}, true);
  EXPECT_TRUE(all.status.is(0)) << all.describe();
  EXPECT_NE(all.out.find("fault " + id + " ended"), std::string::npos) << all.describe();
  EXPECT_NE(all.out.find("all faults ended (kill switch)"), std::string::npos) << all.describe();
  EXPECT_EQ(served("POST /v1/abort-all 200", 1), 1u) << faultd().err();
  f.write_stdin("\n");
  EXPECT_TRUE(f.wait_for("HOLD", 30s)) << "the command did not run on after the kill switch: " << f.describe();
  EXPECT_EQ(sample(scrape(metrics_port()), series), -1) << "an ended fault is still exported";
}

TEST_F(FaultdTest, MetricsOffListensNowhere) {
  start_faultd({"--metrics", "off"});
  EXPECT_EQ(metrics_port(), 0);
  EXPECT_NE(faultd().err().find("metrics off"), std::string::npos) << faultd().err();
}

}  // namespace
}  // namespace fldaemon
