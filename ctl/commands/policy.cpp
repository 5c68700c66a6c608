// faultctl policy validate|compile FILE: the policy file checked offline, and the
// map images it compiles into, without touching the kernel.
#include <iostream>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/policy_faults.h"
#include "userspace/policy/policy_compiler.h"

namespace faultline {
namespace {

constexpr const char* kPolicyUsage =
    "usage: faultctl policy validate FILE\n"
    "       faultctl policy compile FILE [--json]\n"
    "  validate: every error as FILE:LINE:COLUMN: FIELD.PATH: reason (exit 2), or a\n"
    "            one-line summary (exit 0). Offline: nothing is resolved or applied.\n"
    "  compile:  the BPF map images each egress scope compiles into (maps, entries,\n"
    "            bytes; --json: every entry, decoded and as bytes) and what today's\n"
    "            maps cannot hold. Touches no kernel state.\n"
    "  FILE is YAML or JSON (apiVersion faultline.dev/v1, kind Policy); - reads stdin.\n"
    "  Reference: docs/policy.md\n";

constexpr Example kPolicyExamples[] = {
    {"check a policy before review; errors name line, column and field", "faultctl policy validate egress.yaml"},
    {"what each scope would write into the sockaddr maps", "faultctl policy compile egress.yaml"},
    {"every entry, for a diff in CI", "faultctl policy compile egress.json --json"},
};

struct PolicyArgs {
  std::string action;  // validate, compile
  std::string file;
  bool json = false;
};

Result<Parsed<PolicyArgs>> parse_policy_args(const std::vector<std::string>& args) {
  PolicyArgs a;
  std::vector<std::string> positional;
  for (const auto& w : args) {
    if (w == "-h" || w == "--help") return Parsed<PolicyArgs>(HelpText{with_examples(kPolicyUsage, kPolicyExamples)});
    if (w == "--json") a.json = true;
    else if (w.size() > 1 && w.front() == '-') return bad("unknown flag '" + w + "'");
    else positional.push_back(w);
  }
  if (positional.empty()) return bad("missing the action: faultctl policy validate|compile FILE");
  a.action = positional[0];
  if (a.action != "validate" && a.action != "compile")
    return bad("unknown action '" + a.action + "' (validate, compile; diff, apply, export and suggest are not "
               "implemented yet)");
  if (positional.size() < 2) return bad("missing the policy file: faultctl policy " + a.action + " FILE");
  if (positional.size() > 2) return bad("unexpected argument '" + positional[2] + "' (one policy file)");
  a.file = positional[1];
  if (a.json && a.action != "compile") return bad("--json is an option of compile");
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
  return out;
}

int run_policy(const PolicyArgs& a) {
  const std::string who = "faultctl policy " + a.action;
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
