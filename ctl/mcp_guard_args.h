// `faultctl mcp-guard` flags: the guard between an agent and one stdio MCP
// server, and its `pins list|accept|reset` subcommands.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/help.h"
#include "ctl/mcp_fault_proxy.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/guard/mcp_finance.h"

namespace faultline {

struct McpGuardArgs {
  // The guard (no verb): the server command and how its calls are judged.
  GuardPolicy policy;
  std::string policy_file;
  std::string server_name;  // --server-name, else from the command (mcp_server_name_of())
  std::string identity;
  std::string json_log;
  std::string state_dir;  // "" for guard_state_dir()
  bool dry_run = false;
  std::chrono::milliseconds approve_timeout{120'000};
  std::vector<std::string> command;  // empty with --upstream-url
  // --upstream-url: a remote server over HTTP instead of a command.
  std::string upstream_url;
  bool upstream_sse = false;                  // --upstream-transport sse (else streamable)
  std::vector<std::string> upstream_headers;  // "Name: value" as given; ${VAR} expanded when the guard starts
  // --listen: the client speaks Streamable HTTP there instead of our stdio.
  std::string listen;
  bool allow_remote = false;
  // --inspect-actions (implied by --finance-pack and each limit): finance
  // actions classified and logged, the limits judged on them.
  bool inspect_actions = false;
  FinanceLimits finance;
  McpFaultSpec fault;  // --fault-tool ...; fault.tool "" for none
  std::string trace;   // --trace FILE
  // --control-plane URL --token T: the activity reported to faultcp (its
  // inventory, GET /v1/guardrails/mcp-servers), spooled in the state folder.
  std::string cp_url;
  std::string cp_token;
  // pins list [--json] | pins accept SERVER [TOOL] | pins reset SERVER
  std::string pins_verb;  // "" for the guard itself
  std::string server;
  std::string tool;
  bool json = false;
  // install [--apply] [--project DIR] [-- GUARD FLAGS] | status | uninstall [--apply]
  std::string install_verb;  // "" unless one of those
  bool apply = false;
  std::string project;                   // "" for the current folder
  std::vector<std::string> guard_flags;  // install: each wrapper's flags
};

// args are what follows "mcp-guard".
[[nodiscard]] Result<Parsed<McpGuardArgs>> parse_mcp_guard_args(const std::vector<std::string>& args);

// A server's name from an --upstream-url: its host and port ("127.0.0.1_3001").
[[nodiscard]] std::string mcp_server_name_of_url(const std::string& url);

// A server's name from its command: the program's file name, or for an
// interpreter or a package runner (node, python3, npx, uvx, ...) its first
// word that is not a flag: its last path part that is not generic (index,
// main, dist, build, src, ...), without an npm scope, "@version" or an
// extension: "npx @modelcontextprotocol/server-filesystem /srv" ->
// "server-filesystem", "node node_modules/x-mcp/dist/index.js" -> "x-mcp",
// "node build/index.js" -> "index".
[[nodiscard]] std::string mcp_server_name_of(const std::vector<std::string>& command);

}  // namespace faultline
