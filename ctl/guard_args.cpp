// `faultctl guard` flags: cxxopts tokenises, we explain; the policy is compiled
// once here, so that its errors come before anything is created.
#include "ctl/guard_args.h"

#include <cxxopts.hpp>

#include "base/errno_names.h"
#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"

namespace faultline {
namespace {

constexpr Example kExamples[] = {
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
};

}  // namespace

Result<Parsed<GuardOptions>> parse_guard_args(const std::vector<std::string>& args) {
  cxxopts::Options o("faultctl guard", "Run a command in a fresh cgroup under an egress policy.");
  o.add_options()
      ("enforce", "block denied destinations (default: monitor, log only)")
      ("default-deny", "deny what no rule allows (default: allow)")
      ("allow", "CIDR[:PORT][/tcp|/udp], repeatable", cxxopts::value<std::vector<std::string>>())
      ("deny", "CIDR[:PORT][/tcp|/udp], repeatable", cxxopts::value<std::vector<std::string>>())
      ("deny-errno", "errno a denied connect gets (default EPERM)", cxxopts::value<std::string>())
      ("redirect", "DEST=TARGET: send what reaches DEST (CIDR[:PORT][/tcp|/udp]) to TARGET (ADDR:PORT), repeatable", cxxopts::value<std::vector<std::string>>())
      ("exfil-cap", "bytes to one destination no rule allows before its egress is dropped, e.g. 10MB", cxxopts::value<std::string>())
      ("json-log", "append every decision as a JSON line to FILE", cxxopts::value<std::string>())
      ("netns", "run the command in this network namespace: NAME (ip netns), PATH or pid:N", cxxopts::value<std::string>())
      ("h,help", "help");
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<GuardOptions>(
        HelpText{with_examples(o.help() + "\n  -- COMMAND ARGS   the command to guard\n", kExamples)});
  GuardOptions g;
  if (cmd.empty()) return bad("missing the command: faultctl guard [flags] -- COMMAND ARGS");
  g.command = cmd;
  g.enforce = r->count("enforce") > 0;
  g.default_deny = r->count("default-deny") > 0;
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
  return Parsed<GuardOptions>(std::move(g));
}

}  // namespace faultline
