// faultctl [--control-plane URL --token T] mcp [--allow-actions]: an MCP
// server on stdio whose tools read faultcp (agents, experiments, policy,
// kill switch, audit) and, with --allow-actions, start an experiment. Each
// tool is one call of faultcp's REST API with the given token.
#include <poll.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/exit_code.h"
#include "base/files.h"
#include "base/version.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "userspace/guard/mcp_wire.h"
#include "userspace/guard_runtime/cp_link.h"
#include "userspace/guardrails/http_client.h"

namespace faultline {
namespace mcp_command_impl {

constexpr uint64_t kCallTimeoutMs = 30'000;
constexpr size_t kMaxText = 1024 * 1024;  // a tool's text, cut beyond
constexpr const char* kUsage =
    "usage: faultctl --control-plane URL --token TOKEN mcp [--allow-actions]\n"
    "  an MCP server on stdin/stdout whose tools read faultcp: list_agents, get_agent,\n"
    "  list_experiments, get_experiment, watch_experiment, get_policy, get_kill_switch,\n"
    "  export_audit; with --allow-actions also run_experiment. FAULTLINE_CP and\n"
    "  FAULTLINE_CP_TOKEN stand in for the flags. Exit 0 when stdin ends, 2 bad input.\n";

struct Tool {
  const char* name;
  const char* description;
  nlohmann::json schema;  // inputSchema
  bool action;            // only with --allow-actions
};

nlohmann::json id_schema() {
  return {{"type", "object"}, {"properties", {{"id", {{"type", "integer"}, {"minimum", 1}}}}}, {"required", {"id"}}};
}

std::vector<Tool> tools() {
  const nlohmann::json none = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  return {
      {"list_agents", "The workspace's agents (hosts running faultd): labels, policy state, last seen.", none, false},
      {"get_agent", "One agent by id.", id_schema(), false},
      {"list_experiments", "The workspace's experiments, newest first, with their state.", none, false},
      {"get_experiment", "One experiment by id: its spec, state, agent, outcome.", id_schema(), false},
      {"watch_experiment",
       "Waits until the experiment is in a final state (completed, aborted-by-slo, failed, cancelled) or timeout_s "
       "passes (default 60, at most 600); returns it.",
       {{"type", "object"},
        {"properties",
         {{"id", {{"type", "integer"}, {"minimum", 1}}},
          {"timeout_s", {{"type", "integer"}, {"minimum", 1}, {"maximum", 600}}}}},
        {"required", {"id"}}},
       false},
      {"get_policy", "The workspace's current policy bundle.", none, false},
      {"get_kill_switch", "Whether the workspace's kill switch is engaged.", none, false},
      {"export_audit", "The workspace's hash-chained audit log (JSON lines; cut at 1 MiB).", none, false},
      {"run_experiment",
       "Submits an experiment (faultcp's POST /v1/experiments body, docs/control-plane.md) and returns it.",
       {{"type", "object"}, {"properties", {{"spec", {{"type", "object"}}}}}, {"required", {"spec"}}},
       true},
  };
}

// faultcp, from --control-plane and --token.
using Cp = CpLink;

struct ToolOutcome {
  std::string text;
  bool error = false;
};

ToolOutcome answer_of(const Result<HttpAnswer>& a) {
  if (!a) return {"faultcp could not be reached: " + a.error().describe(), true};
  std::string body = a->response.body;
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_discarded()) body = doc.dump(2);
  if (body.size() > kMaxText) body = body.substr(0, kMaxText) + "\n[cut at 1 MiB]";
  const int code = a->response.status.code;
  if (code < 200 || code >= 300) return {"faultcp answered " + std::to_string(code) + ": " + body, true};
  return {body, false};
}

Result<int64_t> id_arg(const nlohmann::json& args) {
  if (!args.contains("id") || !args["id"].is_number_integer() || args["id"].get<int64_t>() < 1)
    return input_error(EINVAL, "id: a whole number, 1 or more");
  return args["id"].get<int64_t>();
}

bool is_final(const std::string& s) {
  return s == "completed" || s == "aborted-by-slo" || s == "failed" || s == "cancelled";
}

ToolOutcome run_tool(const Cp& cp, const std::string& name, const nlohmann::json& args) {
  if (name == "list_agents") return answer_of(cp.call("GET", "/v1/agents"));
  if (name == "list_experiments") return answer_of(cp.call("GET", "/v1/experiments"));
  if (name == "get_policy") return answer_of(cp.call("GET", "/v1/policy"));
  if (name == "get_kill_switch") return answer_of(cp.call("GET", "/v1/kill"));
  if (name == "export_audit") return answer_of(cp.call("GET", "/v1/audit/export"));
  if (name == "run_experiment") {
    if (!args.contains("spec") || !args["spec"].is_object()) return {"spec: an object (the experiment)", true};
    return answer_of(cp.call("POST", "/v1/experiments", args["spec"].dump()));
  }
  auto id = id_arg(args);
  if (!id) return {id.error().message, true};
  if (name == "get_agent") return answer_of(cp.call("GET", "/v1/agents/" + std::to_string(*id)));
  if (name == "get_experiment") return answer_of(cp.call("GET", "/v1/experiments/" + std::to_string(*id)));
  // watch_experiment
  int64_t timeout_s = 60;
  if (args.contains("timeout_s")) {
    if (!args["timeout_s"].is_number_integer() || args["timeout_s"].get<int64_t>() < 1 ||
        args["timeout_s"].get<int64_t>() > 600)
      return {"timeout_s: a whole number of seconds from 1 to 600", true};
    timeout_s = args["timeout_s"].get<int64_t>();
  }
  const uint64_t until = monotonic_ns() + static_cast<uint64_t>(timeout_s) * 1'000'000'000ULL;
  for (;;) {
    auto a = cp.call("GET", "/v1/experiments/" + std::to_string(*id));
    ToolOutcome out = answer_of(a);
    if (out.error) return out;
    auto doc = nlohmann::json::parse(a->response.body, nullptr, false);
    const std::string state = doc.is_object() ? doc.value("status", "") : "";
    if (is_final(state)) return out;
    if (monotonic_ns() >= until) {
      out.text = "not final after " + std::to_string(timeout_s) + " s (status " + state + "):\n" + out.text;
      return out;
    }
    sleep_ms(1000);
  }
}

void write_line(const std::string& line) {
  if (auto st = write_all(STDOUT_FILENO, line + "\n", "stdout"); !st) std::cerr << st.error().describe() << "\n";
}

void on_message(const Cp& cp, bool allow_actions, const McpLineReader::Line& line) {
  if (line.oversized)
    return write_line(jsonrpc_error_line(nullptr, kJsonRpcInvalidRequest, "Invalid Request: a line over 10 MiB"));
  const McpMessage m = parse_mcp_message(line.text);
  if (m.kind == McpMessage::Kind::NotJson)
    return write_line(jsonrpc_error_line(nullptr, kJsonRpcParseError, "Parse error: " + m.problem));
  if (m.kind == McpMessage::Kind::Invalid)
    return write_line(jsonrpc_error_line(m.id, kJsonRpcInvalidRequest, "Invalid Request: " + m.problem));
  if (m.kind != McpMessage::Kind::Request) return;  // notifications, responses
  auto reply = [&](nlohmann::json result) {
    write_line(nlohmann::json{{"jsonrpc", "2.0"}, {"id", m.id}, {"result", std::move(result)}}.dump());
  };
  const nlohmann::json params = m.doc.contains("params") ? m.doc["params"] : nlohmann::json::object();
  if (m.method == "initialize") {
    std::string version = "2025-06-18";
    if (params.is_object() && params.contains("protocolVersion") && params["protocolVersion"].is_string()) {
      const std::string asked = params["protocolVersion"].get<std::string>();
      if (asked == "2024-11-05" || asked == "2025-03-26" || asked == "2025-06-18") version = asked;
    }
    return reply({{"protocolVersion", version},
                  {"capabilities", {{"tools", nlohmann::json::object()}}},
                  {"serverInfo", {{"name", "faultline"}, {"version", version_string()}}}});
  }
  if (m.method == "ping") return reply(nlohmann::json::object());
  if (m.method == "tools/list") {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& t : tools()) {
      if (t.action && !allow_actions) continue;
      list.push_back({{"name", t.name},
                      {"description", t.description},
                      {"inputSchema", t.schema},
                      {"annotations", {{"readOnlyHint", !t.action}}}});
    }
    return reply({{"tools", list}});
  }
  if (m.method == "tools/call") {
    const std::string name = params.is_object() && params.contains("name") && params["name"].is_string()
                                 ? params["name"].get<std::string>()
                                 : "";
    const nlohmann::json args = params.is_object() && params.contains("arguments") && params["arguments"].is_object()
                                    ? params["arguments"]
                                    : nlohmann::json::object();
    bool known = false;
    for (const auto& t : tools()) known |= t.name == name && (!t.action || allow_actions);
    if (!known)
      return write_line(jsonrpc_error_line(m.id, kJsonRpcInvalidParams, "Invalid params: no tool '" + name + "'"));
    const ToolOutcome out = run_tool(cp, name, args);
    return write_line(tool_result_line(m.id, out.text, out.error));
  }
  write_line(jsonrpc_error_line(m.id, -32601, "Method not found: " + m.method));
}

}  // namespace mcp_command_impl

using namespace mcp_command_impl;

int cmd_mcp(const std::vector<std::string>& args, const std::string& url, const std::string& token) {
  bool allow_actions = false;
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return kExitCompleted;
    }
    if (a == "--allow-actions") {
      allow_actions = true;
      continue;
    }
    std::cerr << "faultctl mcp: unknown flag or word '" << a << "'\n" << kUsage;
    return kExitBadInput;
  }
  if (url.empty()) {
    std::cerr << "faultctl mcp: give --control-plane URL (or FAULTLINE_CP) before the command\n";
    return kExitBadInput;
  }
  auto link = CpLink::create(url, token, {.timeout_ms = kCallTimeoutMs});
  if (!link) {
    std::cerr << "faultctl mcp: " << link.error().message << "\n";
    return link.error().bad_input ? kExitBadInput : kExitFailure;
  }
  const Cp& cp = *link;
  const HttpUrl* base = &cp.base();
  std::cerr << "faultline mcp: faultcp " << base->host << ":" << base->port << base->path << " on stdio"
            << (allow_actions ? ", actions allowed (run_experiment)" : ", read tools only") << "\n";
  McpLineReader reader;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (const auto& l : reader.feed(std::string_view(buf, static_cast<size_t>(n)))) on_message(cp, allow_actions, l);
  }
  if (auto last = reader.finish()) on_message(cp, allow_actions, *last);
  return kExitCompleted;
}

}  // namespace faultline
