// The packet experiment's field table against `faultctl run KIND`'s flags:
// every flag the experiment carries round-trips CLI -> JSON -> faultd's
// reader (the served run's) to the same FaultSpec and guardrails, the flags it
// does not carry are the host's own, and a value the CLI refuses is refused by
// the reader with the same words, the flag renamed to its field.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "ctl/packet_args.h"
#include "ctl/syscall_args.h"
#include "parse_words.h"
#include "userspace/daemon/served_run.h"
#include "userspace/faults/packet/experiment.h"
#include "userspace/faults/syscall/experiment.h"

namespace faultline {
namespace {

// What faultctl sends faultd for a command line (run_packet.cpp), read back by faultd.
Result<ServedRun> served_from_cli(const std::string& line) {
  auto a = args_of(parse_packet_args(split(line)));
  if (!a) return a.error();
  auto spec = packet_spec_to_json(a->spec);
  if (!spec) return spec.error();
  FL_TRY(add_experiment_guardrails(a->flags.guardrails, a->flags.record, *spec));
  return served_run_from_json(served_run_request(*spec, a->attach, a->flags.json, a->flags.redactor, false));
}

// The FaultSpec as text, but for a seed drawn on either side.
std::string without_drawn_seed(FaultSpec s) {
  if (s.seed_drawn) s.seed.reset();
  s.seed_drawn = false;
  return s.to_json().dump() + " force=" + std::to_string(s.force);
}

// The guardrails as text: every field a guardrail runs with.
std::string guardrails_text(const GuardrailOptions& g) {
  nlohmann::json j = nlohmann::json::object();
  if (g.health)
    j["health"] = {g.health->url, g.health->max_latency_ns, g.health->interval_ns, g.health->netns, g.health->ca_file};
  if (g.prometheus) {
    const auto& p = *g.prometheus;
    j["prometheus"] = {
        p.polling.endpoint.url,     p.polling.endpoint.ca_file, p.polling.interval_ns, p.polling.query_errors, p.query,
        p.abort_above.value_or(-1), p.abort_below.value_or(-1)};
  }
  if (g.kernel_signal)
    j["kernel_signal"] = {g.kernel_signal->signal, g.kernel_signal->abort_above, g.kernel_signal->netns,
                          g.kernel_signal->window_ns};
  return j.dump();
}

// The packet table as flag <-> field pairs.
std::vector<FlagField> packet_flags() {
  std::vector<FlagField> t;
  for (const auto& f : packet_experiment_fields()) t.push_back({f.flag, f.field});
  return t;
}

// The CLI's words from its flag on ("--percent: '300' is outside 0-100") are
// the reader's from its field's flag on ("spec.percent (--percent): '300' is
// outside 0-100"), other flags named as their fields.
void expect_same_words(const std::string& m, const std::string& j, std::span<const FlagField> table) {
  const auto flag_at = j.find(" (--");
  ASSERT_NE(flag_at, std::string::npos) << "the reader names no flag: " << j;
  const auto close = j.find(')', flag_at);
  const std::string flag = j.substr(flag_at + 2, close - flag_at - 2);
  ASSERT_EQ(m.rfind(flag, 0), 0u) << "the CLI names another flag: " << m << " | " << j;
  auto rest = [](std::string s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == ':')) s.erase(s.begin());
    return s;
  };
  std::string cli_words = rest(m.substr(flag.size()));
  for (const auto& f : table) {
    const std::string from = std::string("--") + f.flag, to = std::string("spec.") + f.field;
    for (size_t at = cli_words.find(from); at != std::string::npos; at = cli_words.find(from, at + to.size()))
      cli_words.replace(at, from.size(), to);
  }
  EXPECT_EQ(rest(j.substr(close + 1)), cli_words) << m << " | " << j;
}

constexpr const char* kTargets = "--target 10.0.0.0/8 --target fd00::7 ";

// One command line per packet flag the experiment carries (with the
// guardrails it carries), each value unlike the default.
const std::vector<std::string>& cli_lines() {
  static const std::vector<std::string> lines = {
      std::string("loss ") + kTargets + "--percent 30 --correlation 25 --duration 30s --netns blue --dev eth0",
      "loss --target 10.0.0.2 --source 192.168.1.0/24 --port 80-90 --proto tcp --direction both --percent 12.5 "
      "--duration 1m",
      "loss --target 10.0.0.2:5432 --proto udp --percent 100 --max-injections 20 --start-after 10s --duration 1m",
      "loss --target 10.0.0.2 --loss-model ge:1.5,20,90,0.25 --seed 18446744073709551615 --duration 2m",
      "loss --cgroup /sys/fs/cgroup/app --percent 5 --seed 0 --duration 5s",
      "partition --dev eth1 --force --duration 20s",
      "partition --target 10.0.0.0/24 --direction ingress --duration 20s",
      "flowdrop --target 10.0.0.3 --target 10.0.0.4 --duration 20s",
      "corrupt --target 10.0.0.2 --percent 1 --proto icmp --duration 30s",
      "duplicate --target 10.0.0.2 --percent 2 --seed 42 --duration 30s",
      "dns --domains example.com,Sub.Example.org. --percent 50 --duration 30s",
      "dns --domains example.com --target 10.0.0.53 --duration 30s",
      "latency --target 10.0.0.2 --delay 100ms --jitter 20ms --distribution pareto --percent 40 --duration 1m",
      "latency --target 10.0.0.2 --delay 1s --jitter 0ms --distribution uniform --duration 1m --attach tc",
      "bandwidth --target 10.0.0.2 --rate 10mbit --duration 2m --attach tcx",
      "partition --netns pid:1 --target 10.0.0.2 --duration 20s --health-url http://10.0.0.2:8080/healthz "
      "--interval 300ms --health-max-latency 250ms --json",
      "partition --target 10.0.0.2 --duration 20s --health-url https://10.0.0.2/h --health-ca "
      "/etc/ssl/certs/ca-certificates.crt "
      "--interval 3s --redact-pattern secret-[0-9]+",
      "partition --target 10.0.0.2 --duration 20s --prometheus-url http://127.0.0.1:9090 --query 'up' "
      "--abort-below 1 --interval 2s --no-redact",
      "partition --target 10.0.0.2 --duration 20s --kernel-signal tcp_retransmits --abort-above 50",
      // Durations the old whole-unit fields could not hold.
      "partition --target 10.0.0.2 --duration 20s --health-url http://10.0.0.2/h --interval 1500ms "
      "--health-max-latency 1500us",
  };
  return lines;
}

TEST(PacketExperiment, EveryCarriedFlagRoundTripsThroughFaultdsReader) {
  for (const auto& line : cli_lines()) {
    SCOPED_TRACE(line);
    auto a = args_of(parse_packet_args(split(line)));
    ASSERT_TRUE(a.ok()) << a.error().message;
    auto served = served_from_cli(line);
    ASSERT_TRUE(served.ok()) << served.error().message;
    EXPECT_EQ(without_drawn_seed(served->spec), without_drawn_seed(a->spec));
    EXPECT_EQ(served->spec.seed_drawn, a->spec.seed_drawn) << "a drawn seed is drawn again, a given one kept";
    EXPECT_EQ(guardrails_text(served->guardrails), guardrails_text(a->flags.guardrails));
    EXPECT_EQ(served->attach, a->attach);
    EXPECT_EQ(served->json, a->flags.json);
    EXPECT_EQ(served->redactor.enabled(), a->flags.redactor.enabled());
    EXPECT_EQ(served->redactor.patterns(), a->flags.redactor.patterns());
  }
}

// Every flag of `faultctl run KIND` is a field of the packet table or of the
// shared guardrail table, or one this host keeps to itself (how it prints,
// where it attaches, a record's folder): no flag is left without a field.
TEST(PacketExperiment, EveryPacketFlagHasAField) {
  std::set<std::string> fields_flags;
  for (const auto& f : packet_experiment_fields()) fields_flags.insert(f.flag);
  for (const auto& f : guardrail_fields()) fields_flags.insert(f.flag);
  // Carried by the served run's request beside the experiment, or not an
  // experiment's at all (a dry run, a record on this host, the proxy path).
  const std::set<std::string> host = {"help",      "attach",  "json",   "redact-pattern",
                                      "no-redact", "dry-run", "record", "via"};
  // The guardrails and record options the experiment does not carry yet:
  // such a run is run by faultctl itself (see docs/daemon.md).
  const std::set<std::string> not_yet = {
      "signal-window", "signal-source", "prometheus-interval", "query-errors",       "slo-burn-rate",
      "slo-target",    "burn-windows",  "slo-watchdog",        "abort-burn-rate-5m", "slo"};
  for (const auto& [flag, takes_value] : packet_run_flags()) {
    EXPECT_TRUE(fields_flags.count(flag) || host.count(flag) || not_yet.count(flag))
        << "--" << flag << " has no field in the packet experiment's table";
  }
  for (const auto& f : packet_experiment_fields())
    EXPECT_TRUE(packet_run_flags().count(f.flag)) << f.field << ": --" << f.flag << " is not a flag of faultctl run";
}

// A value the CLI refuses is refused by the reader with the CLI's own words:
// "--proto 'x': expected tcp, udp or icmp" is "spec.proto (--proto): 'x':
// expected tcp, udp or icmp".
TEST(PacketExperiment, TheReaderRefusesAsTheCliDoes) {
  struct Case {
    std::string cli;      // the flags after the kind's
    nlohmann::json spec;  // the same value, as JSON
  };
  const nlohmann::json loss = {{"kind", "loss"}, {"target", "10.0.0.2"}, {"duration_sec", 30}};
  auto with = [&](nlohmann::json base, const char* field, nlohmann::json v) {
    base[field] = std::move(v);
    return base;
  };
  const std::vector<Case> cases = {
      {"loss --target 10.0.0.2 --percent 5 --proto sctp --duration 30s", with(loss, "proto", "sctp")},
      {"loss --target 10.0.0.2 --percent 5 --direction up --duration 30s", with(loss, "direction", "up")},
      {"loss --target 10.0.0.2 --loss-model ge:0 --duration 30s", with(loss, "loss_model", "ge:0")},
      {"loss --target 10.0.0.2 --loss-model gx --duration 30s", with(loss, "loss_model", "gx")},
      {"loss --target 10.0.0.2 --loss-model ge:1,2,3,4,5 --duration 30s", with(loss, "loss_model", "ge:1,2,3,4,5")},
      {"latency --target 10.0.0.2 --delay 5ms --jitter 1ms --distribution flat --duration 30s",
       {{"kind", "latency"},
        {"target", "10.0.0.2"},
        {"delay_ms", 5},
        {"jitter_ms", 1},
        {"distribution", "flat"},
        {"duration_sec", 30}}},
      {"loss --target 10.0.0.2 --percent 5 --seed 1x --duration 30s", with(loss, "seed", "1x")},
      {"loss --target 10.0.0.2 --percent 5 --seed 18446744073709551616 --duration 30s",
       with(loss, "seed", "18446744073709551616")},
      {"loss --target 10.0.0.2 --percent 5 --rate 10mbit --duration 30s", with(loss, "rate_bps", 10'000'000)},
      {"partition --target 10.0.0.2 --percent 5 --duration 30s",
       {{"kind", "partition"}, {"target", "10.0.0.2"}, {"percent", 5}, {"duration_sec", 30}}},
      {"partition --target 10.0.0.2 --seed 5 --duration 30s",
       {{"kind", "partition"}, {"target", "10.0.0.2"}, {"seed", 5}, {"duration_sec", 30}}},
      {"loss --target 10.0.0.2 --percent 5 --start-after 30s --duration 30s", with(loss, "start_after_ms", 30'000)},
      {"flowdrop --target 10.0.0.0/24 --duration 30s",
       {{"kind", "flowdrop"}, {"target", "10.0.0.0/24"}, {"duration_sec", 30}}},
      {"loss --target 10.0.0.2 --percent 5 --cgroup /x --direction both --duration 30s",
       with(with(loss, "cgroup", "/x"), "direction", "both")},
      {"latency --target 10.0.0.2 --delay 5ms --direction both --duration 30s",
       {{"kind", "latency"}, {"target", "10.0.0.2"}, {"delay_ms", 5}, {"direction", "both"}, {"duration_sec", 30}}},
      // The numbers: each cap in the CLI's words.
      {"loss --target 10.0.0.2 --percent 300 --duration 30s", with(loss, "percent", 300)},
      {"loss --target 10.0.0.2 --percent 5 --correlation 101 --duration 30s",
       with(with(loss, "percent", 5), "correlation", 101)},
      {"loss --target 10.0.0.2 --percent 5 --duration 2h", with(with(loss, "percent", 5), "duration_sec", 7200)},
      {"latency --target 10.0.0.2 --delay 61s --duration 30s",
       {{"kind", "latency"}, {"target", "10.0.0.2"}, {"delay_ms", 61'000}, {"duration_sec", 30}}},
      {"latency --target 10.0.0.2 --delay 0s --duration 30s",
       {{"kind", "latency"}, {"target", "10.0.0.2"}, {"delay_ms", 0}, {"duration_sec", 30}}},
      {"latency --target 10.0.0.2 --delay 5ms --jitter 11s --duration 30s",
       {{"kind", "latency"}, {"target", "10.0.0.2"}, {"delay_ms", 5}, {"jitter_ms", 11'000}, {"duration_sec", 30}}},
      {"loss --target 10.0.0.2 --percent 5 --max-injections 0 --duration 30s", with(loss, "max_injections", 0)},
      {"loss --target 10.0.0.2 --percent 5 --max-injections 2000000000 --duration 30s",
       with(loss, "max_injections", 2'000'000'000)},
      {"loss --target 10.0.0.2 --percent 5 --start-after 0s --duration 30s", with(loss, "start_after_ms", 0)},
      {"bandwidth --target 10.0.0.2 --rate 1000bit --duration 30s",
       {{"kind", "bandwidth"}, {"target", "10.0.0.2"}, {"rate_bps", 1000}, {"duration_sec", 30}}},
      {"bandwidth --target 10.0.0.2 --rate 500000000000bit --duration 30s",
       {{"kind", "bandwidth"}, {"target", "10.0.0.2"}, {"rate_bps", 500'000'000'000ULL}, {"duration_sec", 30}}},
      // The words of the scope.
      {"loss --target 10.0.0.2 --percent 5 --dev abcdefghijklmnop --duration 30s",
       with(loss, "dev", "abcdefghijklmnop")},
      {"loss --target 10.0.0.2 --percent 5 --netns ../x --duration 30s", with(loss, "netns", "../x")},
      {"loss --target 10.0.0.2 --percent 5 --source 10.0.0.300 --duration 30s", with(loss, "source", "10.0.0.300")},
      {"loss --target 10.0.0.2 --percent 5 --port http --duration 30s", with(loss, "port", "http")},
      {"loss --target 10.0.0.2 --percent 5 --port 90-80 --duration 30s", with(loss, "port", "90-80")},
      {"dns --domains a..b --duration 30s", {{"kind", "dns"}, {"domains", {"a..b"}}, {"duration_sec", 30}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.cli);
    auto cli = args_of(parse_packet_args(split(c.cli)));
    ASSERT_FALSE(cli.ok()) << "the CLI took it";
    auto json = experiment_from_json(c.spec, "");
    ASSERT_FALSE(json.ok()) << "the reader took " << c.spec.dump();
    expect_same_words(cli.error().message, json.error().message, packet_flags());
  }
}

// The same for a syscall experiment: its counts, percent, start and errno.
TEST(SyscallExperiment, TheReaderRefusesAsTheCliDoes) {
  const std::string flags = "--syscall connect --errno EIO --cgroup x --duration 30s ";
  const nlohmann::json base = {
      {"kind", "syscall"}, {"syscall", "connect"}, {"errno", "EIO"}, {"cgroup", "x"}, {"duration_sec", 30}};
  auto with = [&](const char* field, nlohmann::json v) {
    nlohmann::json j = base;
    j[field] = std::move(v);
    return j;
  };
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {flags + "--percent 300", with("percent", 300)},
      {flags + "--percent -1", with("percent", -1)},
      {flags + "--after 0", with("after", 0)},
      {flags + "--after 2000000000", with("after", 2'000'000'000)},
      {flags + "--max-injections 0", with("max_injections", 0)},
      {flags + "--start-after 0s", with("start_after_ms", 0)},
      {"--syscall connect --errno EWHAT --cgroup x --duration 30s", with("errno", "EWHAT")},
  };
  for (const auto& [line, spec] : cases) {
    SCOPED_TRACE(line);
    auto cli = args_of(parse_syscall_args(split(line)));
    ASSERT_FALSE(cli.ok()) << "the CLI took it";
    auto json = experiment_from_json(spec, "");
    ASSERT_FALSE(json.ok()) << "the reader took " << spec.dump();
    expect_same_words(cli.error().message, json.error().message, syscall_flag_fields());
  }
}

}  // namespace
}  // namespace faultline
