// Flag parsing for `faultctl run KIND` (packet faults): cxxopts tokenises, we validate and explain.
#include "ctl/packet_args.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cxxopts.hpp>

#include "base/seeded_random.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "userspace/faults/packet/experiment.h"

namespace faultline {
namespace {

// The flags of the packet experiment's fields take their help and range from
// its table (userspace/faults/packet/experiment.cpp); the others are this host's.
cxxopts::Options packet_options() {
  cxxopts::Options o("faultctl run", "Apply a packet fault for a fixed duration, guarded.");
  auto help = [](const char* flag) { return flag_help(packet_experiment_fields(), flag); };
  auto text = [] { return cxxopts::value<std::string>(); };
  auto list = [] { return cxxopts::value<std::vector<std::string>>(); };
  // clang-format off
  o.add_options()
      ("kind", help("kind"), text())
      ("netns", help("netns"), text())
      ("dev", help("dev"), text())
      ("target", help("target"), list())
      ("source", help("source"), text())
      ("port", help("port"), text())
      ("proto", help("proto"), text())
      ("direction", help("direction"), text())
      ("cgroup", help("cgroup"), text())
      ("percent", help("percent"), text())
      ("correlation", help("correlation"), text())
      ("loss-model", help("loss-model"), text())
      ("domains", help("domains"), list())
      ("duration", help("duration"), text())
      ("delay", help("delay"), text())
      ("jitter", help("jitter"), text())
      ("distribution", help("distribution"), text())
      ("rate", help("rate"), text())
      ("max-injections", help("max-injections"), text())
      ("start-after", help("start-after"), text())
      ("seed", help("seed"), text())
      ("attach", "tcx|tc (default: the best the kernel has)", text())
      ("via", "latency, bandwidth: edt (every packet, needs sch_fq) or proxy (TCP streams through the proxy; the "
              "default on a kernel without sch_fq)", text())
      ("force", help("force"))
      ("h,help", "this help");
  // clang-format on
  add_run_options(o);
  o.parse_positional({"kind"});
  o.positional_help("KIND");
  return o;
}

// IP, CIDR, HOST:PORT, [v6]:PORT, or a host name (resolved now).
Status parse_target(const std::string& t, FaultSpec& spec, std::optional<uint16_t>& target_port) {
  std::string host = t;
  std::optional<uint16_t> port;
  auto set_port = [&](const std::string& p) -> Status {
    auto r = parse_port_range(p);
    if (!r || r->lo != r->hi) return bad("--target " + t + ": the port must be a single number 1-65535");
    port = r->lo;
    return {};
  };
  if (!t.empty() && t.front() == '[') {
    auto close = t.find(']');
    if (close == std::string::npos) return bad("--target " + t + ": unclosed [IPv6] address");
    host = t.substr(1, close - 1);
    if (close + 1 < t.size()) {
      if (t[close + 1] != ':') return bad("--target " + t + ": expected :PORT after ]");
      FL_TRY(set_port(t.substr(close + 2)));
    }
  } else if (std::count(t.begin(), t.end(), ':') == 1) {
    auto colon = t.find(':');
    host = t.substr(0, colon);
    FL_TRY(set_port(t.substr(colon + 1)));
  }
  if (host.empty()) return bad("--target " + t + ": no address");
  auto prefix = parse_prefix(host);
  if (prefix) {
    spec.targets.push_back(*prefix);
  } else {
    if (host.find('/') != std::string::npos || host.find_first_not_of("0123456789.") == std::string::npos)
      return bad("--target " + t + ": " + prefix.error().message);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res); rc != 0)
      return bad("--target " + t + ": not an address, and the name does not resolve (" + gai_strerror(rc) + ")");
    for (auto* a = res; a != nullptr; a = a->ai_next) {
      char buf[64] = {};
      if (a->ai_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof(buf));
      else if (a->ai_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf, sizeof(buf));
      else
        continue;
      auto p = parse_prefix(buf);
      if (p &&
          std::none_of(spec.targets.begin(), spec.targets.end(), [&](const Prefix& x) { return x.str() == p->str(); }))
        spec.targets.push_back(*p);
    }
    freeaddrinfo(res);
  }
  if (port) {
    if (target_port && *target_port != *port)
      return bad("--target " + t + ": all targets of one fault must share one port (use one fault per port)");
    target_port = port;
  }
  return {};
}

constexpr const char* kKinds =
    "\n  KIND: loss, partition, flowdrop, corrupt, duplicate, dns, latency, bandwidth\n"
    "  other faults: faultctl run syscall --help; faultctl run process|cpu|memory|disk --help\n";

constexpr Example kPacketExamples[] = {
    {"drop 30% of the packets to 10.0.0.2 for 30 s", "faultctl run loss --target 10.0.0.2 --percent 30 --duration 30s"},
    {"bursty loss: Gilbert-Elliott, 1% into the bad state, 20% back out",
     "faultctl run loss --target 10.0.0.0/8 --loss-model ge:1,20 --duration 2m"},
    {"from the namespace blue, delay what goes to 10.0.0.2:443 by 100 +- 20 ms",
     "faultctl run latency --netns blue --target 10.0.0.2:443 --delay 100ms --jitter 20ms --distribution normal "
     "--duration 1m"},
    {"cut a subnet off both ways on eth0",
     "faultctl run partition --dev eth0 --target 10.0.0.0/24 --direction both --duration 20s"},
    {"cut a local service off, UDP and TCP (the route lookup attaches to lo)",
     "faultctl run loss --target 127.0.0.1:5432 --percent 100 --duration 30s"},
    {"drop the DNS queries for example.com and its subdomains",
     "faultctl run dns --domains example.com --duration 30s"},
    {"cap the bandwidth to a host at 10 Mbit/s",
     "faultctl run bandwidth --target 10.0.0.2 --rate 10mbit --duration 2m"},
    {"end at once if the health check is not answered within 1 s",
     "faultctl run loss --target 10.0.0.2 --percent 10 --duration 5m --health-url http://10.0.0.2:8080/healthz "
     "--health-max-latency 1s"},
    {"an experiment: steady state, fault, verdict, all recorded in ./exp-latency",
     "faultctl run latency --target 10.0.0.2 --delay 200ms --duration 2m --health-url http://10.0.0.2:8080/healthz "
     "--hypothesis 'checkout p99 stays under 500ms' --slo 'p99<500ms' --record ./exp-latency"},
    {"10 s from now, drop the next 20 packets to 10.0.0.2:5432, then none",
     "faultctl run loss --target 10.0.0.2:5432 --percent 100 --max-injections 20 --start-after 10s --duration 1m"},
    {"replay an earlier run's loss decisions (its seed is in the started line)",
     "faultctl run loss --target 10.0.0.2 --percent 30 --seed 42 --duration 30s"},
    {"print the plan as JSON, change nothing",
     "faultctl run corrupt --target 10.0.0.2 --percent 1 --duration 30s --dry-run --json"},
};

}  // namespace

FlagTable packet_run_flags() { return flag_table(packet_options()); }

std::string packet_run_usage() {
  return with_examples(packet_options().help({"", "guardrail", "experiment record", "output"}) + kKinds,
                       kPacketExamples);
}

Result<Parsed<PacketRunArgs>> parse_packet_args(const std::vector<std::string>& args) {
  auto options = packet_options();
  auto parsed = parse_flag_words(options, args);
  if (!parsed) return parsed.error();
  const cxxopts::ParseResult& r = *parsed;
  if (r.count("help")) return Parsed<PacketRunArgs>(HelpText{packet_run_usage()});
  if (!r.count("kind"))
    return bad(
        "missing the fault kind: one of loss, partition, flowdrop, corrupt, duplicate, dns, latency, bandwidth "
        "(packet) or process, cpu, memory, disk (host)");

  PacketRunArgs o;
  FaultSpec& s = o.spec;
  auto kind = kind_from_name(r["kind"].as<std::string>());
  if (!kind)
    return bad(
        "unknown fault kind '" + r["kind"].as<std::string>() +
        "' (loss, partition, flowdrop, corrupt, duplicate, dns, latency, bandwidth; process, cpu, memory, disk)");
  s.kind = *kind;
  for (const auto& kv : r.arguments()) FL_TRY(check_kind_takes(s.kind, kv.key()));
  auto str = [&](const char* f) { return r[f].as<std::string>(); };

  if (!r.count("duration")) return bad("--duration is required (at most 1h), e.g. --duration 30s");
  {
    auto d = with_flag("duration", parse_duration_ns(str("duration")));
    if (!d) return d.error();
    s.duration_ns = *d;
  }
  if (r.count("netns")) {
    s.netns = str("netns");
    FL_TRY(check_netns_name(s.netns));
  }
  if (r.count("dev")) {
    s.dev = str("dev");
    FL_TRY(check_dev_name(s.dev));
  }
  std::optional<uint16_t> target_port;
  if (r.count("target")) {
    for (const auto& t : r["target"].as<std::vector<std::string>>()) FL_TRY(parse_target(t, s, target_port));
  }
  if (r.count("source")) {
    auto p = with_flag("source", parse_prefix(str("source")));
    if (!p) return p.error();
    s.source = *p;
  }
  if (r.count("port")) {
    if (target_port) return bad("--port conflicts with the port given in --target");
    auto p = with_flag("port", parse_port_range(str("port")));
    if (!p) return p.error();
    s.ports = *p;
  } else if (target_port) {
    s.ports = {*target_port, *target_port};
  }
  if (r.count("proto")) {
    auto p = parse_proto(str("proto"));
    if (!p) return p.error();
    s.proto = *p;
    if (s.proto == IPPROTO_ICMP && s.ports.hi != 0)
      return bad("--proto icmp has no ports; drop --port or the :PORT of --target");
  }
  if (r.count("direction")) {
    auto d = parse_direction(str("direction"));
    if (!d) return d.error();
    s.dir_mask = *d;
  }
  if (r.count("cgroup")) {
    s.cgroup = str("cgroup");
    if (s.cgroup.empty()) return bad("--cgroup: empty path");
  }
  bool needs_percent = s.kind == FaultKind::Loss || s.kind == FaultKind::Corrupt || s.kind == FaultKind::Duplicate;
  if (r.count("percent")) {
    auto p = with_flag("percent", parse_percent(str("percent")));
    if (!p) return p.error();
    s.percent = *p;
  } else if (needs_percent && !r.count("loss-model")) {
    return bad(std::string("--percent is required for a ") + kind_name(s.kind) + " fault");
  }
  if (r.count("correlation")) {
    auto c = with_flag("correlation", parse_percent(str("correlation")));
    if (!c) return c.error();
    s.correlation = *c;
  }
  if (r.count("loss-model")) {
    if (r.count("percent")) return bad("--loss-model sets the loss rate itself; drop --percent");
    if (r.count("correlation")) return bad("--loss-model and --correlation are two different loss models; pick one");
    auto g = parse_loss_model(str("loss-model"));
    if (!g) return g.error();
    s.ge = *g;
  }
  if (r.count("domains")) {
    for (const auto& d : r["domains"].as<std::vector<std::string>>()) {
      auto n = with_flag("domains", normalize_domain(d));
      if (!n) return n.error();
      if (std::find(s.domains.begin(), s.domains.end(), *n) == s.domains.end()) s.domains.push_back(*n);
    }
  }
  if (r.count("delay")) {
    auto d = with_flag("delay", parse_duration_ns(str("delay")));
    if (!d) return d.error();
    if (*d == 0) return bad("--delay must be above 0");
    s.delay_ns = *d;
  }
  if (r.count("jitter")) {
    auto j = with_flag("jitter", parse_duration_ns(str("jitter")));
    if (!j) return j.error();
    s.jitter_ns = *j;
  }
  if (r.count("distribution")) {
    if (!r.count("jitter")) return bad("--distribution shapes --jitter; give --jitter too");
    auto d = parse_distribution(str("distribution"));
    if (!d) return d.error();
    s.dist = *d;
  }
  if (r.count("rate")) {
    auto v = with_flag("rate", parse_rate_bps(str("rate")));
    if (!v) return v.error();
    s.rate_bps = *v;
  }
  if (r.count("max-injections")) {
    auto n = parse_count_flag("max-injections", str("max-injections"), 1, FaultCaps::kMaxInjections);
    if (!n) return n.error();
    s.max_injections = *n;
  }
  if (r.count("start-after")) {
    auto d = with_flag("start-after", parse_duration_ns(str("start-after")));
    if (!d) return d.error();
    if (*d == 0) return bad("--start-after must be above 0 (leave it out to start at once)");
    s.start_after_ns = *d;
  }
  if (r.count("seed")) {
    auto seed = parse_seed_flag(str("seed"));
    if (!seed) return seed.error();
    s.seed = *seed;
  } else if (kind_is_random(s.kind)) {
    s.seed = draw_seed();
    s.seed_drawn = true;
  }
  s.force = r.count("force") > 0;
  if (r.count("attach")) {
    std::string a = str("attach");
    if (a == "tcx")
      o.attach = AttachMode::Tcx;
    else if (a == "tc")
      o.attach = AttachMode::Tc;
    else
      return bad("--attach '" + a + "': expected tcx or tc");
  }
  if (r.count("via")) {
    std::string v = str("via");
    if (v == "edt")
      o.via = PacketVia::Edt;
    else if (v == "proxy")
      o.via = PacketVia::Proxy;
    else
      return bad("--via '" + v + "': expected edt (packets, on fq) or proxy (TCP streams)");
  }
  for (const auto& kv : r.arguments()) o.given.push_back(kv.key());
  if (auto v = validate(s); !v) return v.error();
  auto flags = parse_run_flags(r, s.netns, s.duration_ns, args);
  if (!flags) return flags.error();
  o.flags = std::move(*flags);
  return Parsed<PacketRunArgs>(std::move(o));
}

}  // namespace faultline
