// 10. The guard's decision alone, per request, with the 1,000 rules of
// scripts/bench-guard.sh's rules-1k policy (333 exact hosts, 333 path
// substrings, 333 wildcard hosts with a method, then the allow): the rule
// index (with_rule_index(), what a running guard judges by) against the walk
// over every rule, and against a policy of the allow rule alone, in the same
// run, rounds interleaved. The request is the bench's: GET /hello to
// 127.0.0.1, which every rule but the last misses.
#include <iostream>

#include "bench/bench_util.h"
#include "userspace/guard/guard_policy.h"

namespace {

using namespace flbench;
using namespace faultline;

GuardRule host_rule(std::string name, GuardVerdict action, std::string_view host) {
  GuardRule r;
  r.name = std::move(name);
  r.action = action;
  r.host = *parse_host_matcher(host);
  return r;
}

GuardPolicy rules_1k() {
  GuardPolicy p;
  for (int i = 0; i < 999; ++i) {
    const std::string name = "r" + std::to_string(i);
    if (i % 3 == 0) {
      p.rules.push_back(host_rule(name, GuardVerdict::Deny, "h" + std::to_string(i) + ".blocked.example"));
    } else if (i % 3 == 1) {
      GuardRule r;
      r.name = name;
      r.path = "/secret-" + std::to_string(i) + "/";
      p.rules.push_back(std::move(r));
    } else {
      GuardRule r = host_rule(name, GuardVerdict::Deny, "*.zone" + std::to_string(i) + ".example");
      r.method = "DELETE";
      p.rules.push_back(std::move(r));
    }
  }
  p.rules.push_back(host_rule("local", GuardVerdict::Allow, "127.0.0.1"));
  return p;
}

// Nanoseconds per decide() over `n` calls.
double ns_per_decision(const GuardPolicy& p, const RequestFacts& f, int n) {
  size_t sink = 0;
  const uint64_t t0 = thread_cpu_ns();
  for (int i = 0; i < n; ++i) sink += decide(p, f).rule.size();
  const uint64_t t1 = thread_cpu_ns();
  if (sink != static_cast<size_t>(n) * 5) std::abort();  // "local" decided every time
  return static_cast<double>(t1 - t0) / n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string summary;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--summary" && i + 1 < argc) {
      summary = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(3, std::atoi(argv[++i]));
    } else {
      std::cerr << "usage: fl_bench_guard_rules [--summary FILE] [--reps N>=3]\n";
      return 2;
    }
  }
  const GuardPolicy walk = rules_1k();
  const auto indexed = with_rule_index(std::make_shared<const GuardPolicy>(walk));
  GuardPolicy one;
  one.rules.push_back(walk.rules.back());
  const auto one_indexed = with_rule_index(std::make_shared<const GuardPolicy>(one));
  RequestFacts f;
  f.method = "GET";
  f.host = "127.0.0.1";
  f.port = 8080;
  f.path = "/hello";

  std::vector<double> w, x, o, ratio_walk, delta;
  constexpr int kCalls = 20'000;
  for (int rep = 0; rep < reps; ++rep) {
    const double a = ns_per_decision(walk, f, kCalls / 10), b = ns_per_decision(*indexed, f, kCalls),
                 c = ns_per_decision(*one_indexed, f, kCalls);
    w.push_back(a);
    x.push_back(b);
    o.push_back(c);
    ratio_walk.push_back(a / b);
    delta.push_back((b - c) / 1000.0);
  }
  const Spread sw = spread(w), sx = spread(x), so = spread(o), sr = spread(ratio_walk), sd = spread(delta);
  std::cout << "decide(), GET /hello to 127.0.0.1, CPU time per decision (median [min-max] of " << reps << "):\n"
            << "  1,000 rules, walk over every rule: " << fmt_spread(sw, 0, " ns") << "\n"
            << "  1,000 rules, indexed (the guard's): " << fmt_spread(sx, 0, " ns") << "\n"
            << "  the allow rule alone, indexed:      " << fmt_spread(so, 0, " ns") << "\n"
            << "  walk / indexed: " << fmt_spread(sr, 1, "x") << "\n"
            << "  1,000 rules - 1 rule, indexed: +" << fmt_spread(sd, 2, " us")
            << " per request (the +10 us p50 target's share spent deciding)\n";
  append_summary(summary, {"10 guard", "decide(), 1k rules indexed vs walk", fmt_spread(sx, 0, " ns"),
                           fmt_spread(sr, 1, "x walk"), "-", "report"});
  append_summary(summary, {"10 guard", "decide(), 1k rules - 1 rule, indexed", fmt_spread(sd, 2, " us"), "-",
                           "<= +10 us", verdict(sd.median <= 10)});
  return 0;
}
