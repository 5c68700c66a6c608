// faultctl: the operator's command line. Thin: every command is library code,
// one file each in ctl/commands/, registered here once.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/exit_code.h"
#include "base/version.h"
#include "ctl/commands/commands.h"
#include "ctl/global_flags.h"
#include "loader/libbpf_log.h"
#include "userspace/ops/resource_state.h"

namespace faultline {
namespace {

struct Command {
  std::string_view name, summary;  // summary: lines of at most 70 characters
  int (*run)(const std::vector<std::string>& args);
};

// The usage text, the dispatch and the unknown-command hint all read this table.
constexpr Command kCommands[] = {
    {"run",
     "apply a fault for a fixed duration, guarded:\n"
     "  run KIND ...         a packet fault: loss, latency, partition, ...\n"
     "  run syscall ...      make syscalls fail with an errno\n"
     "  run tcp ...          TCP stream faults (latency, bandwidth, reset,\n"
     "                       ...) on the connections to a target, through\n"
     "                       a proxy the kernel redirects them to\n"
     "  run http ...         HTTP faults (a status, a delay, a reset, a cut\n"
     "                       response, an LLM provider's failure) per request\n"
     "  run process|cpu|memory|disk ...\n"
     "                       a host resource fault, reverted by a detached\n"
     "                       reaper even if faultctl dies",
     cmd_run},
    {"guard",
     "run a command under the request guard: allow, deny or hold each\nrequest it makes (guard [flags] -- COMMAND "
     "ARGS)",
     cmd_guard},
    {"mcp-guard",
     "guard the tool calls between an agent and an MCP server\n(mcp-guard [flags] -- SERVER ARGS, or --upstream-url "
     "U;\n"
     " mcp-guard pins list|accept|reset: the pinned tool definitions;\n"
     " mcp-guard install|status|uninstall: the clients' configs)",
     cmd_mcp_guard},
    {"policy",
     "check, compile, apply, export or diff an egress policy file\n(policy validate|compile|apply|delete|export|diff)",
     cmd_policy},
    {"apply",
     "apply a Policy file, or run a Chaos Mesh Network/Stress/PodChaos here\n(apply -f FILE [--cgroup PATH] "
     "[--dry-run])",
     cmd_apply},
    {"catalogue",
     "the templates automation may start: list, show one, render one to an\nexperiment or a Chaos Mesh file "
     "(catalogue list|show|render)",
     cmd_catalogue},
    {"scenario",
     "check or run a scenario file: experiments and templates in order,\nguarded (scenario validate|run FILE)",
     cmd_scenario},
    {"ca", "the local CA of TLS termination: create, print, export, rotate\n(ca init|show|export|rotate)", cmd_ca},
    {"approvals", "the requests running guards hold for approval\n(approvals list | approve ID | deny ID [--reason R])",
     cmd_approvals},
    {"activity", "check the guard's activity log, chain by chain\n(activity verify FILE)", cmd_activity},
    {"top", "destinations and traffic of a cgroup or the whole host, live", cmd_top},
    {"status", "list active faults (packet, resource, syscall, tcp) and guards", cmd_status},
    {"abort", "end one fault (N, rN, sN, tN) or release a guard (gN); --all: every fault", cmd_abort},
    {"report", "print an experiment record (report DIR); --verify checks it", cmd_report},
    {"features", "what this kernel supports and which mechanism each fault uses", cmd_features},
    {"uninstall", "remove every program, link, filter, qdisc and pin of Faultline,\nand revert every resource fault",
     cmd_uninstall},
    {"version", "print faultctl's version", nullptr},
};

constexpr std::string_view kUsageEnd = R"(
experiments: --hypothesis TEXT --record DIR [--steady-state 30s] [--slo p99<300ms]

exit codes: 0 done (hypothesis held), 1 failure, 2 bad input, 7 aborted by the
guardrail (or refused: steady state outside it), 8 hypothesis refuted

on a control plane (faultcp): faultctl --control-plane URL --token TOKEN COMMAND
  (or FAULTLINE_CP, FAULTLINE_CP_TOKEN; FAULTLINE_CP_CA: a PEM CA for https)
  run KIND ... --agent ID | --hostname NAME [--detach]
                       submit a fault of any kind (packet, syscall, tcp,
                       http, process, cpu, memory, disk) to an agent and
                       follow it to its end: the same exit codes as a
                       local run
  list [--json]        the workspace's experiments
  watch ID [--json]    follow one to its end (its exit code)
  abort ID             cancel one; its agent ends it at once
  policy put|apply FILE [--dry-run] [--all | --label K=V ... | --hostname H ...]
  policy get | export [--format yaml|json]
                       the workspace's policy bundle, versioned; its agents
                       apply it at their next poll (needs --control-plane
                       on the command line: without it, policy is this host's)
  mcp [--allow-actions]
                       an MCP server on stdio whose tools read the workspace
                       (agents, experiments, policy, audit); run_experiment
                       only with --allow-actions
)";

std::string usage() {
  size_t width = 0;
  for (const auto& c : kCommands) width = std::max(width, c.name.size());
  const std::string indent(2 + width + 2, ' ');
  std::string out =
      "usage: faultctl COMMAND [flags]\n"
      "       faultctl COMMAND --help      its flags and examples\n"
      "\n"
      "commands:\n";
  for (const auto& c : kCommands) {
    out += "  " + std::string(c.name) + std::string(width + 2 - c.name.size(), ' ');
    for (char ch : c.summary) out += ch == '\n' ? "\n" + indent : std::string(1, ch);
    out += "\n";
  }
  return out + std::string(kUsageEnd);
}

std::string command_names() {
  std::string out;
  for (const auto& c : kCommands) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

}  // namespace
}  // namespace faultline

int main(int argc, char** argv) {
  using namespace faultline;
  configure_libbpf_log();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::cout << usage();
    return args.empty() ? kExitBadInput : kExitCompleted;
  }
  // The control plane: global flags before the command, or the environment.
  auto global = take_global_flags(args, [](const char* name) { return std::getenv(name); });
  if (!global) {
    std::cerr << "faultctl: " << global.error().message << "\n";
    return kExitBadInput;
  }
  if (args.empty()) {
    std::cerr << "faultctl: a command is needed after the control plane's flags (run, list, watch, abort)\n";
    return kExitBadInput;
  }
  std::string name = args[0];
  args.erase(args.begin());
  if (name == "version" || name == "--version") {
    std::cout << "faultctl " << version_string() << "\n";
    return kExitCompleted;
  }
  // `policy put|get|export|apply` are the control plane's with --control-plane
  // on the command line (FAULTLINE_CP alone does not turn a host's own
  // `policy export|apply` into the workspace's).
  const bool remote_policy = name == "policy" && global->cp_flag_given && !args.empty() &&
                             (args[0] == "put" || args[0] == "get" || args[0] == "export" || args[0] == "apply");
  // `apply -f FILE --control-plane URL`: the control plane's flags may also follow apply.
  if (name == "apply") {
    std::vector<std::string> cp_words, rest;
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& w = args[i];
      if ((w == "--control-plane" || w == "--token") && i + 1 < args.size()) {
        cp_words.push_back(w);
        cp_words.push_back(args[++i]);
      } else if (w.rfind("--control-plane=", 0) == 0 || w.rfind("--token=", 0) == 0) {
        cp_words.push_back(w);
      } else {
        rest.push_back(w);
      }
    }
    if (!cp_words.empty()) {
      auto given = [&](const std::string& flag) {
        return std::any_of(cp_words.begin(), cp_words.end(),
                           [&](const std::string& w) { return w.rfind(flag, 0) == 0; });
      };
      // What came before apply stands unless given again after it.
      if (global->cp_flag_given && !given("--control-plane")) cp_words.push_back("--control-plane=" + global->cp_url);
      if (!global->cp_token.empty() && !given("--token")) cp_words.push_back("--token=" + global->cp_token);
      auto after = take_global_flags(cp_words, [](const char* n) { return std::getenv(n); });
      if (!after) {
        std::cerr << "faultctl apply: " << after.error().message << "\n";
        return kExitBadInput;
      }
      global = std::move(after);
      args = std::move(rest);
    }
  }
  const bool remote_apply = name == "apply" && global->cp_flag_given;
  const bool remote_command =
      name == "run" || name == "list" || name == "watch" || name == "abort" || remote_policy || remote_apply;
  if (!global->cp_url.empty() && remote_command) return cmd_remote(name, args, global->cp_url, global->cp_token);
  if (name == "mcp") return cmd_mcp(args, global->cp_url, global->cp_token);
  if (name == "list" || name == "watch") {
    std::cerr << "faultctl: " << name << " asks a control plane: give --control-plane URL (or FAULTLINE_CP)\n";
    return kExitBadInput;
  }
  // The guards report to the control plane given before them (or FAULTLINE_CP):
  // handed on as their own flags, which win when they have them too (not to
  // mcp-guard's pins and install verbs, which speak to no control plane).
  const bool mcp_guard_verb =
      name == "mcp-guard" && !args.empty() &&
      (args[0] == "pins" || args[0] == "install" || args[0] == "status" || args[0] == "uninstall");
  if ((name == "guard" || (name == "mcp-guard" && !mcp_guard_verb)) && !global->cp_url.empty()) {
    const auto dashes = std::find(args.begin(), args.end(), "--");
    auto has = [&](const std::string& flag) {
      return std::any_of(args.begin(), dashes,
                         [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
    };
    std::vector<std::string> front;
    if (!has("--control-plane")) front.push_back("--control-plane=" + global->cp_url);
    if (!has("--token") && !global->cp_token.empty()) front.push_back("--token=" + global->cp_token);
    args.insert(args.begin(), front.begin(), front.end());
  }
  // Resource faults cannot expire in the kernel: every invocation reverts the
  // overdue ones whose reaper died, and re-arms faults that lost their reaper.
  sweep_resource_state(std::cerr);
  for (const auto& c : kCommands) {
    if (c.name == name) return c.run(args);
  }
  std::cerr << "faultctl: unknown command '" << name << "' (" << command_names() << ")\n";
  return kExitBadInput;
}
