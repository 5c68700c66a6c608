// `faultctl guard` flags: cxxopts tokenises, we explain; the policy is compiled
// once here, so that its errors come before anything is created.
#include "ctl/guard_args.h"

#include <cxxopts.hpp>

#include "base/errno_names.h"
#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "ctl/policy_faults.h"
#include "ctl/tls_flags.h"
#include "userspace/policy/policy_compiler.h"

namespace faultline {
namespace {

constexpr Example kGuardExamples[] = {
    {"monitor: nothing is blocked; traffic outside 10/8 is logged as would-deny",
     "faultctl guard --default-deny --allow 10.0.0.0/8 --json-log guard.jsonl -- ./integration-tests.sh"},
    {"reach only the database and DNS; refuse the rest with ECONNREFUSED",
     "faultctl guard --enforce --default-deny --allow 10.0.0.5:5432/tcp --allow 10.0.0.53:53/udp "
     "--deny-errno ECONNREFUSED -- ./app"},
    {"what goes to 10.9.9.9:80 reaches a local stand-in instead",
     "faultctl guard --redirect 10.9.9.9:80=127.0.0.1:18080 -- curl http://10.9.9.9/"},
    {"drop the egress to a destination outside 10/8 once it has had 10 MB",
     "faultctl guard --enforce --allow 10.0.0.0/8 --exfil-cap 10MB -- ./batch-job"},
    {"the command runs in network namespace blue, under the same policy",
     "faultctl guard --netns blue --enforce --deny 10.0.0.0/8 -- ./app"},
    {"HTTPS (port 443 by default), not terminated: its connections wait 2 s",
     "faultctl guard --fault-host 127.0.0.1 --fault-delay 2s -- ./client"},
    {"TLS ended with the local CA (the command trusts it): 30% of /v1/ get 503",
     "faultctl guard --terminate-tls --fault-host localhost:8443 --fault-path /v1/ --fault-status 503 "
     "--fault-pct 30 -- curl https://localhost:8443/v1/items"},
    {"a plain-HTTP model API stand-in is overloaded; only 10/8 and lo reachable",
     "faultctl guard --enforce --default-deny --allow 10.0.0.0/8 --allow 127.0.0.0/8 --fault-host 127.0.0.1:8089 "
     "--fault-llm overloaded -- node agent.js"},
};

// The flags a policy file replaces: given with --policy, one of them is refused.
constexpr const char* kPolicyFlags[] = {"enforce", "default-deny", "allow", "deny", "deny-errno", "exfil-cap"};

// --policy FILE: the file's one egress scope as the guard's policy.
Status apply_policy_file(const std::string& file, GuardOptions& g) {
  auto text = read_policy_text(file);
  if (!text) return bad("--policy " + text.error().describe());
  PolicyParse p = parse_policy_bounded(*text, {}, "faultctl guard", "--policy " + file);
  if (!p.ok()) {
    std::string more = p.errors.size() > 1 ? " (and " + std::to_string(p.errors.size() - 1) +
                                                 " more: faultctl policy validate " + file + ")"
                                           : "";
    return bad("--policy " + p.errors[0].render(file) + more);
  }
  const Policy& pol = p.policy;
  if (pol.faults)
    return bad("--policy " + file +
               ": spec.faults: the guard applies the egress section only (run experiments with "
               "faultctl run)");
  if (!pol.egress || pol.egress->size() != 1)
    return bad("--policy " + file + ": spec.egress: the guard takes exactly one scope, found " +
               std::to_string(pol.egress ? pol.egress->size() : 0));
  const EgressScope& s = pol.egress->front();
  if (!s.host_wide)
    return bad("--policy " + file + ": spec.egress[0]: " + s.label() +
               ": the guard judges the command's own cgroup, not another; write the scope as all: true");
  for (size_t i = 0; i < s.rules.size(); ++i) {
    if (!s.rules[i].cidr)
      return bad("--policy " + file + ": spec.egress[0].rules[" + std::to_string(i) + "] " + s.rules[i].name +
                 " (host " + s.rules[i].host +
                 "): a guard does not learn addresses from DNS answers; host rules are enforced by an applied "
                 "policy (faultctl policy apply FILE, with a cgroup: scope for the command's cgroup), or write "
                 "the addresses as cidr rules here");
  }
  auto c = compile_policy(pol);
  if (!c) return bad("--policy " + file + ": " + c.error().message);
  const CompiledScope& cs = c->scopes.front();
  g.enforce = s.mode == PolicyMode::Enforce;
  g.default_deny = !s.default_allow;
  g.deny_errno = s.deny_errno;
  g.exfil_cap = s.exfil_cap;
  g.rules = cs.egress_rules();
  g.policy_name = pol.name;
  return {};
}

// The HTTP faults: the --fault-* flags (one fault, first) and --faults FILE.
Status parse_fault_flags(const cxxopts::ParseResult& r, GuardArgs& a) {
  GuardFaults& gf = a.faults;
  auto str = [&](const char* f) { return r[f].as<std::string>(); };
  gf.terminate_tls = r.count("terminate-tls") > 0;
  GuardFaultWords w;
  bool any = false;
  for (auto [flag, slot] : std::initializer_list<std::pair<const char*, std::optional<std::string>*>>{
           {"fault-host", &w.host},
           {"fault-path", &w.path},
           {"fault-status", &w.status},
           {"fault-delay", &w.delay},
           {"fault-truncate", &w.truncate},
           {"fault-llm", &w.llm},
           {"fault-llm-provider", &w.llm_provider},
           {"fault-pct", &w.pct},
           {"fault-attempts", &w.attempts}}) {
    if (r.count(flag)) {
      *slot = str(flag);
      any = true;
    }
  }
  w.reset = r.count("fault-reset") > 0;
  any = any || w.reset;
  if (any) {
    auto name = [](const std::string& field) { return "--fault-" + field; };
    auto f = guard_fault_from_words(w, gf.terminate_tls, 0, "", name);
    if (!f) return f.error();
    gf.faults.push_back(std::move(*f));
  }
  if (r.count("faults")) {
    const std::string file = str("faults");
    if (file.empty()) return bad("--faults: empty file name");
    auto more = parse_guard_faults_file(file, gf.terminate_tls, gf.faults.size());
    if (!more) return more.error();
    for (auto& f : *more) gf.faults.push_back(std::move(f));
  }
  if (gf.faults.empty()) {
    for (const char* flag : {"terminate-tls", "upstream-ca"})
      if (r.count(flag))
        return bad(std::string("--") + flag +
                   " applies to HTTP faults: add --fault-host H with a --fault-* fault, "
                   "or --faults FILE");
    return {};
  }
  FL_TRY(check_upstream_ca(gf.terminate_tls, r.count("upstream-ca") > 0,
                           r.count("upstream-ca") ? str("upstream-ca") : std::string()));
  if (r.count("upstream-ca")) gf.upstream_ca = str("upstream-ca");
  if (!a.guard.netns.empty())
    return bad(
        "--netns with HTTP faults: the faults' proxy runs in faultctl's network namespace, which a command in "
        "another cannot reach; run the guard inside that namespace instead (ip netns exec NS faultctl guard ...)");
  return {};
}

}  // namespace

Result<Parsed<GuardArgs>> parse_guard_args(const std::vector<std::string>& args) {
  cxxopts::Options o("faultctl guard", "Run a command in a fresh cgroup under an egress policy.");
  o.add_options()("enforce", "block denied destinations (default: monitor, log only)")(
      "default-deny", "deny what no rule allows (default: allow)")("allow", "CIDR[:PORT][/tcp|/udp], repeatable",
                                                                   cxxopts::value<std::vector<std::string>>())(
      "deny", "CIDR[:PORT][/tcp|/udp], repeatable", cxxopts::value<std::vector<std::string>>())(
      "deny-errno", "errno a denied connect gets (default EPERM)", cxxopts::value<std::string>())(
      "redirect", "DEST=TARGET: send what reaches DEST (CIDR[:PORT][/tcp|/udp]) to TARGET (ADDR:PORT), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "exfil-cap", "bytes to one destination no rule allows before its egress is dropped, e.g. 10MB",
      cxxopts::value<std::string>())("json-log", "append every decision as a JSON line to FILE",
                                     cxxopts::value<std::string>())(
      "netns", "run the command in this network namespace: NAME (ip netns), PATH or pid:N",
      cxxopts::value<std::string>())(
      "policy",
      "the policy from a policy file (docs/policy.md): its one egress scope, all: true, instead of "
      "--enforce, --default-deny, --allow, --deny, --deny-errno and --exfil-cap",
      cxxopts::value<std::string>())(
      "fault-host", "HTTP fault: the host whose requests are faulted, NAME or ADDRESS[:PORT] (port 443 by default)",
      cxxopts::value<std::string>())(
      "fault-path", "HTTP fault: only requests under this path (a prefix of whole segments, or a glob)",
      cxxopts::value<std::string>())("fault-status", "HTTP fault: answer this status (200-599) instead of forwarding",
                                     cxxopts::value<std::string>())(
      "fault-delay", "HTTP fault: hold each request this long (1ms-60s)", cxxopts::value<std::string>())(
      "fault-reset", "HTTP fault: reset the connection (RST) once the request is read (TLS: once its ClientHello is)")(
      "fault-truncate", "HTTP fault: forward, then cut the response body after N bytes", cxxopts::value<std::string>())(
      "fault-llm",
      "HTTP fault: a model provider's failure: overloaded, rate-limit, server-error, bad-gateway, "
      "timeout, stream-cut",
      cxxopts::value<std::string>())(
      "fault-llm-provider", "HTTP fault: --fault-llm as anthropic or openai answers (default: from the host's name)",
      cxxopts::value<std::string>())("fault-pct", "HTTP fault: the share of matching requests faulted (default 100)",
                                     cxxopts::value<std::string>())(
      "fault-attempts",
      "HTTP fault: only the first N attempts of each request (1-100, the SDKs' x-stainless-retry-count)",
      cxxopts::value<std::string>())("faults",
                                     "HTTP faults from a YAML or JSON file: a list of {host, path, "
                                     "status|delay|reset|truncate|llm, llm-provider, pct, "
                                     "attempts}",
                                     cxxopts::value<std::string>())(
      "terminate-tls",
      "end the command's TLS to the faulted hosts with a leaf of the local CA (faultctl ca), which "
      "the command is told to trust; without it a TLS connection takes --fault-delay and --fault-reset only")(
      "upstream-ca", "--terminate-tls: a PEM file of roots the upstream may also chain to",
      cxxopts::value<std::string>())("h,help", "help");
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<GuardArgs>(
        HelpText{with_examples(o.help() + "\n  -- COMMAND ARGS   the command to guard\n", kGuardExamples)});
  GuardArgs args_out;
  GuardOptions& g = args_out.guard;
  if (cmd.empty()) return bad("missing the command: faultctl guard [flags] -- COMMAND ARGS");
  g.command = cmd;
  if (r->count("policy")) {
    for (const char* flag : kPolicyFlags) {
      if (r->count(flag))
        return bad(std::string("--") + flag + " comes from the policy file with --policy; write it there");
    }
    const std::string file = (*r)["policy"].as<std::string>();
    if (file.empty()) return bad("--policy: empty file name");
    FL_TRY(apply_policy_file(file, g));
  }
  g.enforce = g.enforce || r->count("enforce") > 0;
  g.default_deny = g.default_deny || r->count("default-deny") > 0;
  for (const char* flag : {"deny", "allow"}) {
    if (!r->count(flag)) continue;
    for (const auto& t : (*r)[flag].as<std::vector<std::string>>()) {
      auto rule = parse_rule(std::string(flag) == "allow" ? Verdict::Allow : Verdict::Deny, t);
      if (!rule) return rule.error();
      g.rules.push_back(*rule);
    }
  }
  if (g.rules.size() > 0xfffe) return bad("too many rules (at most 65534)");
  if (r->count("redirect")) {
    for (const auto& t : (*r)["redirect"].as<std::vector<std::string>>()) {
      auto rule = parse_redirect(t);
      if (!rule) return rule.error();
      g.redirects.push_back(*rule);
    }
  }
  if (g.redirects.size() > 0xfffe) return bad("too many --redirect rules (at most 65534)");
  if (r->count("deny-errno")) {
    auto e = errno_from_name((*r)["deny-errno"].as<std::string>());
    if (!e) return bad("--deny-errno " + (*r)["deny-errno"].as<std::string>() + ": not a known errno name");
    g.deny_errno = *e;
  }
  if (r->count("exfil-cap")) {
    auto b = with_flag("exfil-cap", parse_size_bytes((*r)["exfil-cap"].as<std::string>()));
    if (!b) return b.error();
    if (*b == 0) return bad("--exfil-cap must be above 0");
    g.exfil_cap = *b;
  }
  if (r->count("json-log")) {
    g.json_log = (*r)["json-log"].as<std::string>();
    if (g.json_log.empty()) return bad("--json-log: empty file name");
  }
  if (r->count("netns")) {
    const std::string spec = (*r)["netns"].as<std::string>();
    if (spec.empty()) return bad("--netns: empty name");
    g.netns = spec;  // resolved by the guard before it makes anything
  }
  // Compile once now so overlap errors come before anything is created.
  for (auto v : {Verdict::Allow, Verdict::Deny}) {
    auto t = compile_rules(g.rules, v);
    if (!t) return bad(t.error().message);
  }
  if (auto t = compile_redirects(g.redirects); !t) return bad(t.error().message);
  FL_TRY(parse_fault_flags(*r, args_out));
  return Parsed<GuardArgs>(std::move(args_out));
}

}  // namespace faultline
