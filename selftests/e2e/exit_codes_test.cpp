// The exit-code contract CI gates rely on: 2 for bad input (with nothing
// attached), 7 when the guardrail trips (and the fault is gone at once), 0 for a
// healthy guarded run; and --dry-run changes nothing.
#include "e2e_fixture.h"

namespace fle2e {
namespace {

class ExitCodes : public E2eTest {};

TEST_P(ExitCodes, BadInputExitsTwoAndAttachesNothing) {
  const std::string b = kAddrB;
  const std::string a = net().a();
  struct Case {
    std::vector<std::string> args;
    std::string names;  // what the message must mention
  };
  const std::vector<Case> cases = {
      {{"loss", "--target", b, "--percent", "150", "--duration", "2s"}, "--percent"},
      {{"loss", "--target", b, "--duration", "2s"}, "--percent"},
      {{"loss", "--target", b, "--percent", "10"}, "--duration"},
      {{"flowdrop", "--target", "198.18.0.0/24", "--duration", "2s"}, "flowdrop"},
      {{"partition", "--duration", "2s"}, "--target"},
      {{"partition", "--target", b, "--duration", "2h"}, "--duration"},
      {{"partition", "--target", b, "--duration", "2s", "--dev", "nosuch0"}, "nosuch0"},
      {{"partition", "--target", b, "--duration", "2s", "--health-url", "ftp://198.18.0.2/"}, "--health-url"},
      {{"teleport", "--target", b, "--duration", "2s"}, "teleport"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.insert(args.end(), {"--netns", a, "--attach", attach()});
    auto r = faultctl(args);
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.names), std::string::npos) << "the message should name " << c.names << ": " << r.describe();
  }
  auto missing = faultctl(
      {"run", "partition", "--target", b, "--duration", "2s", "--netns", "fle2e-no-such-netns", "--attach", attach()});
  EXPECT_TRUE(missing.status.is(2)) << missing.describe();
  expect_nothing_left("after rejected runs");
}

TEST_P(ExitCodes, GuardrailBreachExitsSevenAndEndsTheFault) {
  const std::string b = kAddrB;
  start_server({"http-server", std::to_string(kHttpPort)});
  const std::string url = std::string("http://") + b + ":" + std::to_string(kHttpPort) + "/health";
  const uint64_t spawned = monotonic_ns();
  ChildProcess run = start_run("partition", {"--target", b, "--duration", "20s", "--health-url", url, "--interval",
                                             "300ms", "--health-max-latency", "300ms"});
  ASSERT_TRUE(wait_started(run));
  auto st = run.wait(10s);
  ASSERT_TRUE(st) << "the guardrail never tripped: " << run.describe();
  EXPECT_TRUE(st->is(7)) << run.describe();
  const double took_s = static_cast<double>(monotonic_ns() - spawned) / 1e9;
  EXPECT_LT(took_s, 8) << "one interval plus one probe timeout should suffice (the fault lasts 20 s)";
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["reason"], "guardrail");
  EXPECT_EQ((*ended)["exit_code"], 7);
  auto get = testhost_on_a({"http-get", b, std::to_string(kHttpPort), "--timeout-ms", "500"});
  EXPECT_TRUE(get.status.is(0)) << "the service must answer again right after the abort: " << get.describe();
  expect_nothing_left("after the guardrail abort");
}

TEST_P(ExitCodes, HealthyGuardedRunExitsZero) {
  // The fault cuts the neighbour address; the guarded service stays healthy.
  start_server({"http-server", std::to_string(kHttpPort)});
  const std::string url = std::string("http://") + kAddrB + ":" + std::to_string(kHttpPort) + "/";
  ChildProcess run =
      start_run("partition", {"--target", kAddrB2, "--duration", "2s", "--health-url", url, "--interval", "300ms"});
  ASSERT_TRUE(wait_started(run));
  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  int probes = 0;
  for (size_t pos = 0; (pos = run.out().find("\"event\":\"probe\"", pos)) != std::string::npos; ++pos) ++probes;
  EXPECT_GE(probes, 3) << "the guardrail should have checked several times: " << run.describe();
  EXPECT_EQ(run.out().find("\"healthy\":false"), std::string::npos) << run.describe();
}

TEST_P(ExitCodes, DryRunChangesNothing) {
  const std::string b = kAddrB;
  start_server({"udp-echo", std::to_string(kEchoPort)});
  auto r = faultctl({"run", "partition", "--target", b, "--duration", "30s", "--netns", net().a(), "--attach", attach(),
                     "--dry-run"});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("nothing was changed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(kDevA), std::string::npos) << "the plan names the device: " << r.out;
  auto j = faultctl({"run", "partition", "--target", b, "--duration", "30s", "--netns", net().a(), "--attach", attach(),
                     "--dry-run", "--json"});
  ASSERT_TRUE(j.status.is(0)) << j.describe();
  auto plan = last_json(j.out);
  EXPECT_EQ(plan["dry_run"], true) << j.out;
  EXPECT_EQ(plan["kind"], "partition") << j.out;
  EXPECT_TRUE(files_under(bpffs_root()).empty()) << "a dry run must not pin anything";
  EXPECT_TRUE(our_programs().empty()) << describe(our_programs());
  EXPECT_FALSE(has_clsact(net().a(), kDevA)) << qdiscs(net().a(), kDevA);
  UdpProbe probe(net().a(), b, kEchoPort);
  EXPECT_TRUE(probe.reachable(500ms)) << "traffic must be untouched by a dry run";
}

FLE2E_ON_BOTH_ATTACH_PATHS(ExitCodes);

}  // namespace
}  // namespace fle2e
