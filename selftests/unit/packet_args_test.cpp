// faultctl run KIND (packet faults) flag parsing: good specs parse, and every bad one names its flag.
#include "ctl/packet_args.h"

#include <gtest/gtest.h>

#include <sstream>
#include <variant>

#include "parse_words.h"

namespace faultline {
namespace {

TEST(PacketArgs, LossWithEveryScopeField) {
  auto r = args_of(parse_packet_args(
      split("loss --target 10.0.0.0/8 --source 192.168.1.0/24 --port 80-90 --proto tcp --direction both --percent 30 "
            "--correlation 25 --duration 30s --netns blue --dev eth0")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const FaultSpec& s = r->spec;
  EXPECT_EQ(s.kind, FaultKind::Loss);
  ASSERT_EQ(s.targets.size(), 1u);
  EXPECT_EQ(s.targets[0].str(), "10.0.0.0/8");
  EXPECT_EQ(s.source->str(), "192.168.1.0/24");
  EXPECT_EQ(s.ports.lo, 80);
  EXPECT_EQ(s.ports.hi, 90);
  EXPECT_EQ(s.dir_mask, FL_DIR_EGRESS | FL_DIR_INGRESS);
  EXPECT_DOUBLE_EQ(s.percent, 30);
  EXPECT_DOUBLE_EQ(s.correlation, 25);
  EXPECT_EQ(s.duration_ns, 30'000'000'000ULL);
  EXPECT_EQ(s.netns, "blue");
  EXPECT_EQ(s.dev, "eth0");
}

TEST(PacketArgs, TargetWithPortAndIpv6) {
  auto r = args_of(parse_packet_args(split("partition --target [fd00::1]:443 --target fd00::2 --duration 1m")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec.targets.size(), 2u);
  EXPECT_EQ(r->spec.ports.lo, 443);
  auto v4 = args_of(parse_packet_args(split("partition --target 10.1.2.3:53 --duration 1m")));
  ASSERT_TRUE(v4.ok()) << v4.error().message;
  EXPECT_EQ(v4->spec.ports.hi, 53);
}

TEST(PacketArgs, GilbertElliottDefaults) {
  auto r = args_of(parse_packet_args(split("loss --loss-model ge:5 --target 10.0.0.1 --duration 10s")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->spec.ge.has_value());
  EXPECT_DOUBLE_EQ(r->spec.ge->p, 5);
  EXPECT_DOUBLE_EQ(r->spec.ge->r, 95);
  EXPECT_DOUBLE_EQ(r->spec.ge->loss_bad, 100);
  EXPECT_DOUBLE_EQ(r->spec.ge->loss_good, 0);
}

TEST(PacketArgs, CapAndDelayedStart) {
  auto r = args_of(parse_packet_args(
      split("loss --target 10.0.0.1 --percent 100 --max-injections 20 --start-after 2s --duration 10s")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec.max_injections, 20u);
  EXPECT_EQ(r->spec.start_after_ns, 2'000'000'000ULL);
  EXPECT_EQ(r->spec.to_json()["max_injections"], 20);
  EXPECT_EQ(r->spec.to_json()["start_after"], "2s");
  EXPECT_NE(r->spec.summary().find("at most 20 packets"), std::string::npos) << r->spec.summary();
}

TEST(PacketArgs, BadCapsAndStartsNameTheirFlag) {
  for (const auto& [line, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--max-injections 0", "--max-injections 0: expected a whole number from 1 to 1000000000"},
           {"--max-injections=-1", "--max-injections '-1': expected a whole number"},
           {"--max-injections 2.5", "--max-injections '2.5': expected a whole number"},
           {"--max-injections 1000000001", "--max-injections 1000000001: too large"},
           {"--max-injections 123456789012345678901234567890", "too large"},
           {"--start-after 0s", "--start-after must be above 0"},
           {"--start-after 1y", "--start-after"},
           {"--start-after 10s", "--start-after 10s is not shorter than --duration 10s"},
           {"--after 3", "after"},
       }) {
    auto r = args_of(parse_packet_args(split("loss --target 10.0.0.1 --percent 100 --duration 10s " + line)));
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << line << " -> " << r.error().message;
  }
}

TEST(PacketArgs, SeedGivenOrDrawnIsInThePlanAndTheSummary) {
  auto r = args_of(
      parse_packet_args(split("loss --target 10.0.0.1 --percent 30 --seed 18446744073709551615 --duration 10s")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec.seed, std::optional<uint64_t>(18446744073709551615ULL));
  EXPECT_FALSE(r->spec.seed_drawn);
  EXPECT_EQ(r->spec.to_json()["seed"], "18446744073709551615") << "a string: a double would round it";
  EXPECT_EQ(r->spec.to_json()["seed_source"], "given");
  EXPECT_NE(r->spec.summary().find(", seed 18446744073709551615"), std::string::npos) << r->spec.summary();
  auto zero = args_of(parse_packet_args(split("corrupt --target 10.0.0.1 --percent 1 --seed 000 --duration 10s")));
  ASSERT_TRUE(zero.ok()) << zero.error().message;
  EXPECT_EQ(zero->spec.seed, std::optional<uint64_t>(0));
  // Without --seed, every kind with a random decision draws one, and says so.
  auto a = args_of(parse_packet_args(split("duplicate --target 10.0.0.1 --percent 5 --duration 10s")));
  auto b = args_of(parse_packet_args(split("duplicate --target 10.0.0.1 --percent 5 --duration 10s")));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->spec.seed.has_value());
  EXPECT_TRUE(a->spec.seed_drawn);
  EXPECT_EQ(a->spec.to_json()["seed_source"], "drawn");
  EXPECT_NE(a->spec.seed, b->spec.seed) << "two draws of 64 bits";
  // A kind that decides nothing at random has no seed to print.
  auto p = args_of(parse_packet_args(split("partition --target 10.0.0.1 --duration 10s")));
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->spec.seed.has_value());
  EXPECT_FALSE(p->spec.to_json().contains("seed"));
}

TEST(PacketArgs, BadSeedsNameTheFlag) {
  for (const auto& [line, needle] : std::vector<std::pair<std::string, std::string>>{
           {"--seed forty-two", "--seed 'forty-two': expected a whole number from 0 to 18446744073709551615"},
           {"--seed=-1", "--seed '-1': expected a whole number"},
           {"--seed 4.2", "--seed '4.2': expected a whole number"},
           {"--seed 0x2a", "--seed '0x2a': expected a whole number"},
           {"--seed=", "--seed '': expected a whole number"},
           {"--seed 18446744073709551616", "--seed 18446744073709551616: too large"},
           {"--seed 99999999999999999999999", "--seed 99999999999999999999999: too large"},
       }) {
    auto r = args_of(parse_packet_args(split("loss --target 10.0.0.1 --percent 30 --duration 10s " + line)));
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << line << " -> " << r.error().message;
  }
  for (const char* kind :
       {"partition --target 10.0.0.1", "flowdrop --target 10.0.0.1", "bandwidth --rate 1mbit --target 10.0.0.1"}) {
    auto r = args_of(parse_packet_args(split(std::string(kind) + " --seed 42 --duration 10s")));
    ASSERT_FALSE(r.ok()) << kind;
    EXPECT_NE(r.error().message.find("--seed does not apply to a"), std::string::npos) << r.error().message;
  }
}

TEST(PacketArgs, DnsDomainsAreNormalised) {
  auto r = args_of(parse_packet_args(split("dns --domains Example.COM.,api.test --duration 10s")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->spec.domains, (std::vector<std::string>{"example.com", "api.test"}));
  EXPECT_DOUBLE_EQ(r->spec.percent, 100);
}

TEST(PacketArgs, GuardrailFlags) {
  auto r = args_of(parse_packet_args(
      split("loss --percent 10 --target 10.0.0.1 --duration 10s --health-url http://10.0.0.2:8080/healthz "
            "--health-max-latency 250ms --interval 500ms --json --dry-run --attach tc")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->flags.guardrails.health.has_value());
  EXPECT_EQ(r->flags.guardrails.health->max_latency_ns, 250'000'000ULL);
  EXPECT_EQ(r->flags.guardrails.health->interval_ns, 500'000'000ULL);
  EXPECT_TRUE(r->flags.json);
  EXPECT_TRUE(r->flags.dry_run);
  EXPECT_EQ(r->attach, AttachMode::Tc);
}

struct BadCase {
  const char* args;
  const char* expect;  // a fragment the one-line error must contain
};

class PacketArgsBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(PacketArgsBad, RefusedWithAMessageNamingTheProblem) {
  const BadCase& c = GetParam();
  auto r = args_of(parse_packet_args(split(c.args)));
  ASSERT_FALSE(r.ok()) << "accepted: " << c.args;
  EXPECT_NE(r.error().err, 0);
  EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << "for '" << c.args << "' got: " << r.error().message;
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << "not one line: " << r.error().message;
}

const BadCase kBad[] = {
    {"", "missing the fault kind"},
    {"explode --duration 1s --force", "unknown fault kind 'explode'"},
    {"loss --percent 30 --target 10.0.0.1", "--duration is required"},
    {"loss --percent 30 --target 10.0.0.1 --duration 2h", "over the cap of 1h"},
    {"loss --percent 30 --target 10.0.0.1 --duration 30", "has no unit"},
    {"loss --percent 30 --target 10.0.0.1 --duration 30parsecs", "unknown unit"},
    {"loss --percent 30 --target 10.0.0.1 --duration -5s", "not a duration"},
    {"loss --percent 30 --target 10.0.0.1 --duration 10ms", "at least 100ms"},
    {"loss --percent 150 --target 10.0.0.1 --duration 1s", "--percent"},
    {"loss --percent abc --target 10.0.0.1 --duration 1s", "not a percentage"},
    {"loss --percent -3 --target 10.0.0.1 --duration 1s", "--percent"},
    {"loss --target 10.0.0.1 --duration 1s", "--percent is required"},
    {"loss --percent 10 --correlation 101 --target 10.0.0.1 --duration 1s", "--correlation"},
    {"loss --loss-model gx:1 --target 10.0.0.1 --duration 1s", "--loss-model"},
    {"loss --loss-model ge:0 --target 10.0.0.1 --duration 1s", "p must be above 0"},
    {"loss --loss-model ge:1,2,3,4,5 --target 10.0.0.1 --duration 1s", "1 to 4 percents"},
    {"loss --loss-model ge:5 --percent 3 --target 10.0.0.1 --duration 1s", "drop --percent"},
    {"loss --loss-model ge:5 --correlation 3 --target 10.0.0.1 --duration 1s", "pick one"},
    {"loss --percent 10 --target 10.0.0.300 --duration 1s", "--target 10.0.0.300"},
    {"loss --percent 10 --target 10.0.0.1/33 --duration 1s", "at most /32"},
    {"loss --percent 10 --target 10.0.0.1/24 --duration 1s", "host bits"},
    {"loss --percent 10 --target fd00::1/129 --duration 1s", "at most /128"},
    {"loss --percent 10 --target 10.0.0.1:0 --duration 1s", "single number 1-65535"},
    {"loss --percent 10 --target 10.0.0.1:70000 --duration 1s", "single number 1-65535"},
    {"loss --percent 10 --target 10.0.0.1:80 --target 10.0.0.2:81 --duration 1s", "share one port"},
    {"loss --percent 10 --target 10.0.0.1:80 --port 81 --duration 1s", "--port conflicts"},
    {"loss --percent 10 --target 10.0.0.1 --port 90-80 --duration 1s", "ends before it starts"},
    {"loss --percent 10 --target 10.0.0.1 --port http --duration 1s", "--port"},
    {"loss --percent 10 --target 10.0.0.1 --proto sctp --duration 1s", "--proto 'sctp'"},
    {"loss --percent 10 --target 10.0.0.1:80 --proto icmp --duration 1s", "icmp has no ports"},
    {"loss --percent 10 --target 10.0.0.1 --direction sideways --duration 1s", "--direction 'sideways'"},
    {"loss --percent 10 --target 10.0.0.1 --source nowhere --duration 1s", "--source"},
    {"loss --percent 10 --duration 1s", "add --target, --cgroup, or --force"},
    {"loss --percent 10 --target 10.0.0.1 --cgroup /x --direction ingress --duration 1s", "--cgroup"},
    {"loss --percent 10 --target 10.0.0.1 --attach xdp --duration 1s", "--attach 'xdp'"},
    {"loss --percent 10 --target 10.0.0.1 --delay 10ms --duration 1s", "--delay does not apply to a loss fault"},
    {"partition --percent 50 --target 10.0.0.1 --duration 1s", "--percent does not apply to a partition"},
    {"flowdrop --duration 1s", "flowdrop needs at least one --target"},
    {"flowdrop --target 10.0.0.0/24 --duration 1s", "use partition for a CIDR"},
    {"dns --duration 1s", "dns needs --domains"},
    {"dns --domains bad..name --duration 1s", "empty label"},
    {"dns --domains exa$mple.com --duration 1s", "not allowed in a domain name"},
    {"dns --domains a.com --port 53 --duration 1s", "always matches UDP port 53"},
    {"dns --domains a.com --proto tcp --duration 1s", "UDP queries only"},
    {"dns --domains a.com --target 10.0.0.1 --target 10.0.0.2 --duration 1s", "at most one resolver"},
    {"latency --target 10.0.0.1 --duration 1s", "latency needs --delay"},
    {"latency --delay 61s --target 10.0.0.1 --duration 1s", "over the cap of 60s"},
    {"latency --delay 1s --jitter 11s --target 10.0.0.1 --duration 1s", "over the cap of 10s"},
    {"latency --delay 1s --distribution normal --target 10.0.0.1 --duration 1s", "give --jitter too"},
    {"latency --delay 1s --jitter 1ms --distribution gamma --target 10.0.0.1 --duration 1s", "--distribution 'gamma'"},
    {"latency --delay 1s --direction ingress --target 10.0.0.1 --duration 1s", "egress only"},
    {"bandwidth --target 10.0.0.1 --duration 1s", "bandwidth needs --rate"},
    {"bandwidth --rate 10 --target 10.0.0.1 --duration 1s", "needs a unit"},
    {"bandwidth --rate 1bit --target 10.0.0.1 --duration 1s", "minimum"},
    {"corrupt --target 10.0.0.1 --duration 1s", "--percent is required"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --health-url ftp://x", "not an http:// or https:// URL"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --health-url http://x/ --health-ca /etc/hostname",
     "is for an https://"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --health-url http://h:99999/", "ports are 1-65535"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --interval 1s", "give --health-url or --prometheus-url too"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --health-url http://h/ --interval 1ms", "--interval"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --health-url http://h/ --health-max-latency 2m",
     "--health-max-latency"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --bogus", "bogus"},
    {"loss --percent 10 --target 10.0.0.1 --duration", "duration"},
    {"loss extra --percent 10 --target 10.0.0.1 --duration 1s", "unexpected argument"},
    {"loss --percent 10 --target 10.0.0.1 --dev averyveryverylongname --duration 1s", "--dev"},
    {"loss --percent 10 --target no-such-host.invalid --duration 1s", "does not resolve"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --kernel-signal cpu_load --abort-above 3",
     "--kernel-signal 'cpu_load'"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --kernel-signal tcp_retransmits", "needs --abort-above"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --kernel-signal tcp_retransmits --abort-above x",
     "not a number"},
    {"loss --percent 10 --target 10.0.0.1 --duration 1s --abort-above 5",
     "give --kernel-signal, --query or --slo-burn-rate too"},
};

INSTANTIATE_TEST_SUITE_P(Bad, PacketArgsBad, ::testing::ValuesIn(kBad),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return "case" + std::to_string(i.index); });

TEST(PacketArgs, KernelSignalGuardrail) {
  auto r =
      args_of(parse_packet_args(split("loss --percent 10 --target 10.0.0.1 --duration 10s --kernel-signal "
                                      "tcp_retransmits --abort-above 50 --signal-window 2s")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->flags.guardrails.kernel_signal.has_value());
  EXPECT_EQ(r->flags.guardrails.kernel_signal->signal, "tcp_retransmits");
  EXPECT_DOUBLE_EQ(r->flags.guardrails.kernel_signal->abort_above, 50);
  EXPECT_EQ(r->flags.guardrails.kernel_signal->window_ns, 2'000'000'000ULL);
}

// --help is an answer wherever it stands, and what comes with it is not judged.
TEST(PacketArgs, HelpIsAnAnswerNotAnError) {
  for (const char* line : {"--help", "-h", "loss --help", "loss --percent 300 --help"}) {
    auto r = parse_packet_args(split(line));
    ASSERT_TRUE(r.ok()) << line << ": " << r.error().message;
    const auto* help = std::get_if<HelpText>(&*r);
    ASSERT_NE(help, nullptr) << line;
    EXPECT_NE(help->text.find("--duration"), std::string::npos) << help->text;
  }
}

TEST(PacketArgs, AtLeastFortyBadInputsAreCovered) { EXPECT_GE(std::size(kBad), 40u); }

}  // namespace
}  // namespace faultline
