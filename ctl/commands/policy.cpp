// faultctl policy validate|compile|apply|delete|export|diff: the policy file
// checked offline, the map images it compiles into, and the applied policy.
#include <unistd.h>

#include <iostream>
#include <optional>

#include "base/clock.h"
#include "base/files.h"
#include "base/units.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/policy_faults.h"
#include "userspace/policy/policy_apply.h"
#include "userspace/policy/policy_compiler.h"
#include "userspace/policy/policy_suggest.h"
#include "userspace/policy/policy_writer.h"

namespace faultline {
namespace {

constexpr const char* kPolicyUsage =
    "usage: faultctl policy validate FILE\n"
    "       faultctl policy compile FILE [--json]\n"
    "       faultctl policy apply FILE [--dry-run]\n"
    "       faultctl policy delete [--dry-run]\n"
    "       faultctl policy export [--format yaml|json]\n"
    "       faultctl policy diff FILE [--simulate LOG] [--cgroup PATH]\n"
    "       faultctl policy suggest --from LOG [--from LOG]... [--window 7d] [--cgroup PATH] [--name NAME]\n"
    "  validate: every error as FILE:LINE:COLUMN: FIELD.PATH: reason (exit 2), or a\n"
    "            one-line summary (exit 0). Offline: nothing is resolved or applied.\n"
    "  compile:  the BPF map images each egress scope compiles into (maps, entries,\n"
    "            bytes; --json: every entry, decoded and as bytes) and what today's\n"
    "            maps cannot hold. Touches no kernel state.\n"
    "  apply:    writes the egress section into the kernel, host-wide (all) and per\n"
    "            cgroup, as a new generation switched by one write; the file's scopes\n"
    "            replace the live ones (egress: [] removes them). Pinned: it stays\n"
    "            without any faultctl running. --dry-run: what would change.\n"
    "  delete:   removes the applied policy, every scope and pin.\n"
    "  export:   the applied policy as a file (yaml, the default, or json).\n"
    "  diff:     rule by rule, FILE against the applied policy; --simulate LOG replays\n"
    "            a guard's --json-log through FILE (as calls from --cgroup, default /).\n"
    "  suggest:  a monitor-mode, default-deny allow-list from recorded traffic (guard\n"
    "            --json-log lines, faultctl top --json samples), one rule per address,\n"
    "            rare ones marked RARE; --window keeps records at most that old.\n"
    "  FILE is YAML or JSON (apiVersion faultline.dev/v1, kind Policy); - reads stdin.\n"
    "  Reference: docs/policy.md\n";

constexpr Example kPolicyExamples[] = {
    {"check a policy before review; errors name line, column and field", "faultctl policy validate egress.yaml"},
    {"what each scope would write into the sockaddr maps", "faultctl policy compile egress.yaml"},
    {"every entry, for a diff in CI", "faultctl policy compile egress.json --json"},
    {"what a change would do to the recorded traffic", "faultctl policy diff egress.yaml --simulate guard.jsonl"},
    {"enforce it host-wide and per cgroup", "faultctl policy apply egress.yaml"},
    {"what is live, as a file", "faultctl policy export --format json"},
    {"an allow-list from a week of monitoring", "faultctl policy suggest --from guard.jsonl --window 7d"},
};

struct PolicyArgs {
  std::string action;  // validate, compile, apply, delete, export, diff
  std::string file;
  bool json = false;
  bool dry_run = false;
  std::string format = "yaml";
  std::string simulate;  // diff --simulate LOG
  std::string cgroup = "/";
  std::vector<std::string> from;  // suggest --from LOG...
  std::optional<double> window_s;
  std::string name = "suggested-egress";
};

// "7d", or a duration as run takes it ("12h", "30m").
Result<double> window_seconds(const std::string& v) {
  if (v.size() > 1 && v.back() == 'd' && v.find_first_not_of("0123456789") == v.size() - 1 && v.size() < 8)
    return std::stod(v.substr(0, v.size() - 1)) * 86400;
  auto ns = parse_duration_ns(v);
  if (!ns) return make_error(EINVAL, "--window " + ns.error().message + " (or days: 7d)");
  return static_cast<double>(*ns) / 1e9;
}

Result<Parsed<PolicyArgs>> parse_policy_args(const std::vector<std::string>& args) {
  PolicyArgs a;
  std::vector<std::string> positional;
  bool format_given = false, cgroup_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    auto value = [&](const std::string& flag) -> Result<std::string> {
      if (i + 1 >= args.size()) return make_error(EINVAL, flag + " needs a value");
      return args[++i];
    };
    if (w == "-h" || w == "--help") return Parsed<PolicyArgs>(HelpText{with_examples(kPolicyUsage, kPolicyExamples)});
    if (w == "--json") {
      a.json = true;
    } else if (w == "--dry-run") {
      a.dry_run = true;
    } else if (w == "--from" || w == "--window" || w == "--name") {
      auto v = value(w);
      if (!v) return bad(v.error().message);
      if (w == "--from") {
        a.from.push_back(*v);
      } else if (w == "--name") {
        a.name = *v;
      } else {
        auto sec = window_seconds(*v);
        if (!sec) return bad(sec.error().message);
        if (*sec <= 0) return bad("--window must be above 0");
        a.window_s = *sec;
      }
    } else if (w == "--format" || w == "--simulate" || w == "--cgroup") {
      auto v = value(w);
      if (!v) return bad(v.error().message);
      if (w == "--format") {
        if (*v != "yaml" && *v != "json") return bad("--format '" + *v + "': expected yaml or json");
        a.format = *v;
        format_given = true;
      } else if (w == "--simulate") {
        a.simulate = *v;
      } else {
        if (v->empty() || v->front() != '/') return bad("--cgroup '" + *v + "': a path below the cgroup2 root, from /");
        a.cgroup = *v;
        cgroup_given = true;
      }
    } else if (w.size() > 1 && w.front() == '-') {
      return bad("unknown flag '" + w + "'");
    } else {
      positional.push_back(w);
    }
  }
  if (positional.empty())
    return bad("missing the action: faultctl policy validate|compile|apply|delete|export|diff|suggest");
  a.action = positional[0];
  if (a.action != "validate" && a.action != "compile" && a.action != "apply" && a.action != "delete" &&
      a.action != "export" && a.action != "diff" && a.action != "suggest")
    return bad("unknown action '" + a.action + "' (validate, compile, apply, delete, export, diff, suggest)");
  const bool takes_file = a.action != "delete" && a.action != "export" && a.action != "suggest";
  if (takes_file && positional.size() < 2) return bad("missing the policy file: faultctl policy " + a.action + " FILE");
  const size_t max_positional = takes_file ? 2 : 1;
  if (positional.size() > max_positional)
    return bad("unexpected argument '" + positional[max_positional] + "'" +
               (takes_file ? " (one policy file)" : " (" + a.action + " takes no file)"));
  if (takes_file) a.file = positional[1];
  if (a.json && a.action != "compile") return bad("--json is an option of compile (export: --format json)");
  if (a.dry_run && a.action != "apply" && a.action != "delete")
    return bad("--dry-run is an option of apply and delete");
  if (format_given && a.action != "export") return bad("--format is an option of export");
  if (!a.simulate.empty() && a.action != "diff") return bad("--simulate is an option of diff");
  const bool suggest = a.action == "suggest";
  if (cgroup_given && a.simulate.empty() && !suggest) return bad("--cgroup goes with diff --simulate or suggest");
  if (suggest && a.from.empty())
    return bad("suggest needs --from LOG (a guard's --json-log, faultctl top --json output)");
  if (!suggest && (!a.from.empty() || a.window_s || a.name != "suggested-egress"))
    return bad("--from, --window and --name are options of suggest");
  if (suggest && cgroup_given && a.cgroup == "/")
    return bad("--cgroup /: the whole host is the default scope (all: true)");
  return Parsed<PolicyArgs>(std::move(a));
}

std::string summary(const Policy& p) {
  size_t rules = 0;
  if (p.egress) {
    for (const auto& s : *p.egress) rules += s.rules.size();
  }
  std::string out = "valid policy " + p.name + ": ";
  out += p.egress ? std::to_string(p.egress->size()) + " egress scope" + (p.egress->size() == 1 ? "" : "s") + " (" +
                        std::to_string(rules) + " rule" + (rules == 1 ? "" : "s") + ")"
                  : "egress left alone";
  out += ", ";
  out += p.faults ? std::to_string(p.faults->size()) + " experiment" + (p.faults->size() == 1 ? "" : "s")
                  : "experiments left alone";
  if (p.guard)
    out += ", guard section (" + std::to_string(p.guard->rules.size()) + " rule" +
           (p.guard->rules.size() == 1 ? "" : "s") + ", " +
           (p.guard->mode == GuardMode::Enforce ? "enforce" : "monitor") + ")";
  return out;
}

int needs_root(const std::string& who) {
  std::cerr << who << ": needs root (the applied policy is BPF programs and pins)\n";
  return kExitFailure;
}

int print_outcome(const std::string& who, const std::string& name, const Result<ApplyOutcome>& out, bool dry_run) {
  if (!out) return report_error(who, out.error());
  if (!out->changed) {
    std::cout << (name.empty() ? "no policy is applied: nothing to delete"
                               : "policy " + name + ": unchanged (already live)")
              << "\n";
    return kExitCompleted;
  }
  if (dry_run)
    std::cout << "dry run, nothing changed; " << (name.empty() ? "delete" : "apply") << " would make:\n";
  else if (name.empty())
    std::cout << "applied policy removed\n";
  else
    std::cout << "applied policy " << name << ": generation " << out->generation << ", " << out->scopes << " scope"
              << (out->scopes == 1 ? "" : "s") << "\n";
  std::cout << diff_text(out->changes);
  return kExitCompleted;
}

int run_live(const PolicyArgs& a, const std::string& who) {
  if (::geteuid() != 0) return needs_root(who);
  const BpffsLayout layout = bpffs_layout();
  if (a.action == "delete") return print_outcome(who, "", delete_policy(layout, a.dry_run), a.dry_run);
  auto live = read_live_policy(layout);
  if (!live) return report_error(who, live.error());
  if (!*live) {
    std::cerr << who << ": no policy is applied\n";
    return kExitFailure;
  }
  std::cout << (a.format == "json" ? (*live)->source : policy_yaml_text((*live)->policy));
  return kExitCompleted;
}

int run_diff(const PolicyArgs& a, const Policy& next, const std::string& who) {
  if (!next.egress) {
    std::cerr << who << ": " << a.file << " has no egress section: apply would leave the live one alone\n";
    return kExitBadInput;
  }
  std::string log;
  if (!a.simulate.empty()) {
    auto text = read_text_file(a.simulate);
    if (!text) return report_error(who, input_error(0, "--simulate " + a.simulate + ": cannot read the file"));
    log = std::move(*text);
  }
  if (::geteuid() != 0) return needs_root(who);
  auto live = read_live_policy(bpffs_layout());
  if (!live) return report_error(who, live.error());
  const std::vector<EgressScope> none;
  const auto& live_scopes = *live && (*live)->policy.egress ? *(*live)->policy.egress : none;
  const auto changes = diff_egress(live_scopes, *next.egress);
  std::cout << "policy " << next.name << " against "
            << (*live ? "the applied policy " + (*live)->policy.name : std::string("no applied policy")) << ": "
            << changes.size() << " change" << (changes.size() == 1 ? "" : "s") << "\n"
            << diff_text(changes);
  if (!a.simulate.empty()) {
    auto decisions = read_decision_log(log);
    if (!decisions)
      return report_error(who, input_error(0, "--simulate " + a.simulate + ": " + decisions.error().message));
    std::cout << "\nsimulated against " << a.simulate << " (calls from cgroup " << a.cgroup << "):\n"
              << simulation_text(simulate_decisions(*decisions, *next.egress, a.cgroup));
  }
  return kExitCompleted;
}

int run_suggest(const PolicyArgs& a, const std::string& who) {
  std::vector<std::pair<std::string, std::string>> logs;
  for (const auto& f : a.from) {
    auto text = read_text_file(f);
    if (!text) return report_error(who, input_error(0, "--from " + f + ": cannot read the file"));
    logs.emplace_back(f, std::move(*text));
  }
  SuggestOptions o;
  o.name = a.name;
  o.cgroup = a.cgroup == "/" ? "" : a.cgroup;
  o.window_s = a.window_s;
  o.now_s = wall_seconds();
  auto s = suggest_policy(logs, o);
  if (!s) return report_error(who, s.error());
  const std::string text = suggestion_text(*s, a.from);
  // What is printed must be a policy validate accepts (a name, for one).
  PolicyParse check = parse_policy(text);
  if (!check.ok()) return report_error(who, input_error(0, check.errors[0].render("<suggestion>")));
  std::cout << text;
  return kExitCompleted;
}

int run_policy(const PolicyArgs& a) {
  const std::string who = "faultctl policy " + a.action;
  if (a.action == "delete" || a.action == "export") return run_live(a, who);
  if (a.action == "suggest") return run_suggest(a, who);
  auto text = read_policy_text(a.file);
  if (!text) return report_error(who, text.error());
  const std::string shown = a.file == "-" ? "<stdin>" : a.file;
  PolicyParse parsed = parse_policy_bounded(*text, run_fault_checker(), who, shown);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::cerr << e.render(shown) << "\n";
    return kExitBadInput;
  }
  if (a.action == "validate") {
    std::cout << shown << ": " << summary(parsed.policy) << "\n";
    return kExitCompleted;
  }
  if (a.action == "diff") return run_diff(a, parsed.policy, who);
  if (a.action == "apply") {
    // apply_policy() checks the same before it locks; without root, the
    // check alone (so a file's problems come before "needs root").
    if (::geteuid() != 0) {
      if (auto st = check_appliable(parsed.policy); !st) return report_error(who, st.error());
      return needs_root(who);
    }
    const std::string name = parsed.policy.egress->empty() ? "" : parsed.policy.name;
    return print_outcome(who, name, apply_policy(bpffs_layout(), parsed.policy, a.dry_run), a.dry_run);
  }
  auto compiled = compile_policy(parsed.policy);
  if (!compiled) return report_error(who, as_bad_input(compiled.error()));
  std::cout << (a.json ? compiled_json(*compiled) : compiled_text(*compiled));
  return kExitCompleted;
}

}  // namespace

int cmd_policy(const std::vector<std::string>& args) {
  return run_command("faultctl policy", parse_policy_args(args), kRootNever, run_policy);
}

}  // namespace faultline
