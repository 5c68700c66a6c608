// The MCP guard's session logic: judge tools/call, pin tools/list, pass the rest.
#include "userspace/guard/mcp_gate.h"

namespace faultline {
namespace mcp_gate_detail {

constexpr std::string_view kOwnListPrefix = "faultline:tools/list:";

std::string id_key(const nlohmann::json& id) { return id.dump(); }

std::string dump_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The arguments as a log line shows them: compact, cut at 200 bytes.
std::string args_text(const nlohmann::json* args) {
  if (args == nullptr) return "{}";
  std::string t = dump_line(*args);
  if (t.size() > 200) t = t.substr(0, 200) + "...";
  return t;
}

}  // namespace mcp_gate_detail

using namespace mcp_gate_detail;

std::string mcp_blocked_text(const std::string& rule, const std::string& reason) {
  return "blocked by faultline: " + (rule.empty() ? std::string("default") : rule) + ": " + reason;
}

std::string mcp_chain_identity(const std::string& identity, const std::string& server) {
  return identity + "/mcp:" + server;
}

McpGate::McpGate(McpGateOptions options, GuardPolicy policy)
    : options_(std::move(options)),
      policy_(std::make_shared<const GuardPolicy>(std::move(policy))),
      approvals_(std::make_unique<ApprovalQueue>(options_.approval_prefix, options_.approve_timeout)) {
  if (options_.inspect_actions && !options_.finance_ledger) {
    auto memory = FinanceLedger::open("");  // no file: cannot fail
    if (memory) options_.finance_ledger = std::move(*memory);
  }
}

McpGate::~McpGate() { approvals_.reset(); }

McpGateCounts McpGate::counts() const {
  const AtomicCounts& c = counts_;
  return {c.calls.load(),      c.allowed.load(),    c.denied.load(),  c.held.load(),      c.approved.load(),
          c.would_deny.load(), c.would_hold.load(), c.dry_run.load(), c.rug_pulls.load(), c.bad_lines.load()};
}

void McpGate::say(const std::string& text) const {
  if (options_.log) options_.log("faultline mcp-guard: " + text);
}

void McpGate::record(std::string_view kind, std::string_view method, const std::string& tool, GuardVerdict v,
                     const std::string& rule) {
  if (!options_.activity) return;
  ActivityEntry e;
  e.identity = options_.activity_identity.empty() ? options_.identity : options_.activity_identity;
  e.kind = std::string(kind);
  e.method = std::string(method);
  e.host = options_.server_name;
  e.path = tool;
  e.verdict = std::string(guard_verdict_name(v));
  e.rule = rule;
  if (auto st = options_.activity->append(std::move(e)); !st) say("activity log: " + st.error().describe());
}

void McpGate::from_client(const McpLineReader::Line& line) {
  if (line.oversized) {
    counts_.bad_lines.fetch_add(1);
    say("a line from the client longer than 10 MiB: refused (-32600)");
    options_.to_client(jsonrpc_error_line(nullptr, kJsonRpcInvalidRequest,
                                          "Invalid Request: a line longer than 10 MiB (refused by faultline)"));
    return;
  }
  McpMessage m = parse_mcp_message(line.text);
  switch (m.kind) {
    case McpMessage::Kind::NotJson:
      counts_.bad_lines.fetch_add(1);
      say("a line from the client is " + m.problem + ": answered -32700");
      options_.to_client(jsonrpc_error_line(nullptr, kJsonRpcParseError, "Parse error: " + m.problem));
      return;
    case McpMessage::Kind::Invalid:
      // Not passed on either: what the guard cannot read, it cannot judge.
      counts_.bad_lines.fetch_add(1);
      say("a message from the client is invalid (" + m.problem + "): answered -32600");
      options_.to_client(jsonrpc_error_line(m.id, kJsonRpcInvalidRequest, "Invalid Request: " + m.problem));
      return;
    case McpMessage::Kind::Request:
      // The call goes on as the gate read it (re-written from its parse), so
      // a server whose parser reads the line otherwise (the first of two
      // "name" fields, say) still gets what was judged.
      if (m.method == "tools/call") return on_call(m, dump_line(m.doc));
      if (m.method == "tools/list") {
        std::lock_guard lock(mu_);
        client_lists_.insert(id_key(m.id));
      }
      break;
    case McpMessage::Kind::Notification:
      if (m.method == "tools/call") {
        // Without an id there is no answer to give, and a server might still
        // run it: never passed on.
        counts_.bad_lines.fetch_add(1);
        say("a tools/call without an id (a notification): dropped, not judged and not sent");
        return;
      }
      break;
    case McpMessage::Kind::Response:
      break;
  }
  options_.to_server(line.text);
}

void McpGate::on_call(const McpMessage& m, const std::string& line) {
  counts_.calls.fetch_add(1);
  const nlohmann::json* params = m.doc.contains("params") ? &m.doc["params"] : nullptr;
  const nlohmann::json* name =
      params != nullptr && params->is_object() && params->contains("name") ? &(*params)["name"] : nullptr;
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    counts_.bad_lines.fetch_add(1);
    say("tools/call without a params.name: answered -32602");
    options_.to_client(jsonrpc_error_line(m.id, kJsonRpcInvalidParams, "Invalid params: tools/call needs params.name"));
    return;
  }
  const std::string tool = name->get<std::string>();
  const nlohmann::json* args = params->contains("arguments") ? &(*params)["arguments"] : nullptr;
  if (args != nullptr && !args->is_object() && !args->is_null()) {
    counts_.bad_lines.fetch_add(1);
    say("tools/call " + tool + ": arguments not an object: answered -32602");
    options_.to_client(
        jsonrpc_error_line(m.id, kJsonRpcInvalidParams, "Invalid params: tools/call's arguments is an object"));
    return;
  }
  if (args != nullptr && args->is_null()) args = nullptr;

  bool read_only = false, output_schema = false;
  std::optional<PinState> hidden;
  {
    std::lock_guard lock(mu_);
    if (auto it = tools_.find(tool); it != tools_.end()) {
      read_only = it->second.read_only;
      output_schema = it->second.output_schema;
      if (it->second.hidden()) hidden = it->second.pin;
    }
  }
  const std::shared_ptr<const GuardPolicy> policy = policy_.load();  // this call's one version
  GuardDecision d;
  if (hidden) {
    d = GuardDecision{
        GuardVerdict::Deny, "rug_pull",
        std::string(*hidden == PinState::Changed ? "the tool's definition changed since it was pinned"
                                                 : "the tool is new since the server's tools were pinned") +
            " (faultctl mcp-guard pins accept " + options_.server_name + " " + tool + ")",
        enforcing(), false};
  } else {
    RequestFacts f;
    f.method = "tools/call";
    f.mcp = true;
    f.mcp_tool = tool;
    f.mcp_arguments = args;
    d = decide(*policy, f);
  }
  FinanceAction action;
  if (options_.inspect_actions && !hidden) {
    action = classify_finance_action(tool, args);
    if (action.kind != FinanceActionKind::None) d = with_finance(std::move(d), action);
  }
  if (d.reason.empty()) d.reason = d.verdict == GuardVerdict::Approve ? "held for approval" : "denied by rule";
  // The activity line's path: the tool, and the action's facts when it is one.
  const std::string facts = action.kind == FinanceActionKind::None ? tool : tool + " " + action.describe();
  const std::string what = "tools/call " + tool + " " + args_text(args) +
                           (action.kind == FinanceActionKind::None ? "" : " [" + action.describe() + "]");
  const std::string rule_text = d.rule.empty() ? "the default" : "rule " + d.rule;

  if (d.verdict == GuardVerdict::Deny) {
    record("mcp", "tools/call", facts, GuardVerdict::Deny, d.rule);
    if (d.enforced) {
      counts_.denied.fetch_add(1);
      say(what + " -> deny (" + rule_text + ": " + d.reason + ")");
      options_.to_client(tool_result_line(m.id, mcp_blocked_text(d.rule, d.reason), true));
      return;
    }
    counts_.would_deny.fetch_add(1);
    say(what + " -> would deny (" + rule_text + ": " + d.reason + "; monitor: passed on)");
  }
  if (options_.dry_run && !read_only) {
    counts_.dry_run.fetch_add(1);
    record("mcp", "tools/call", facts, GuardVerdict::Deny, "dry_run");
    say(what + " -> dry run: not sent (the tool is not annotated readOnlyHint)");
    // A tool with an outputSchema must answer structuredContent unless the
    // result is an error (clients check it): its dry-run answer is an error.
    options_.to_client(tool_result_line(m.id,
                                        "would execute: " + tool + " " + args_text(args) +
                                            " (faultline --dry-run: not sent, the tool is not annotated read-only)",
                                        output_schema));
    return;
  }
  if (d.verdict == GuardVerdict::Approve && !d.enforced) {
    counts_.would_hold.fetch_add(1);
    record("mcp", "tools/call", facts, GuardVerdict::Approve, d.rule);
    say(what + " -> would hold for approval (" + rule_text + ": " + d.reason + "; monitor: passed on)");
  } else if (d.verdict == GuardVerdict::Approve) {
    counts_.held.fetch_add(1);
    const uint64_t n = next_call_.fetch_add(1) + 1;
    PendingApproval p;
    p.request_id = n;
    p.denial_id = "mcp_" + options_.approval_prefix + "_" + std::to_string(n);
    p.identity = options_.identity;
    p.method = "tools/call";
    p.host = options_.server_name;
    p.path = tool + " " + args_text(args);
    p.rule = d.rule;
    p.reason = d.reason;
    // Settled on the deciding thread; the queue is this gate's, destroyed first.
    const std::string id =
        approvals_->add(std::move(p), [this, line, rpc_id = m.id, facts, what, action, rule = d.rule,
                                       reason = d.reason](ApprovalOutcome o, const std::string& why) {
          switch (o) {
            case ApprovalOutcome::Approved:
              counts_.approved.fetch_add(1);
              record("mcp", "tools/call", facts, GuardVerdict::Allow, rule);
              say(what + " -> approved" + (why.empty() ? "" : " (" + why + ")"));
              send_call(line, action);
              return;
            case ApprovalOutcome::Denied:
            case ApprovalOutcome::TimedOut: {
              counts_.denied.fetch_add(1);
              const std::string r = o == ApprovalOutcome::Denied
                                        ? "denied by a person" + (why.empty() ? "" : ": " + why)
                                        : "no approval within the timeout" + (reason.empty() ? "" : ": " + reason);
              record("mcp", "tools/call", facts, GuardVerdict::Deny, rule);
              say(what + " -> " + r);
              options_.to_client(tool_result_line(rpc_id, mcp_blocked_text(rule, r), true));
              return;
            }
            case ApprovalOutcome::Withdrawn:
              return;
          }
        });
    record("mcp", "tools/call", facts, GuardVerdict::Approve, d.rule);
    say(what + " -> held for approval " + id + " (" + rule_text + "): faultctl approvals approve " + id + " | deny " +
        id);
    return;
  } else if (d.verdict == GuardVerdict::Allow) {
    counts_.allowed.fetch_add(1);
    record("mcp", "tools/call", facts, GuardVerdict::Allow, d.rule);
    say(what + " -> allow (" + rule_text + ")");
  }
  send_call(line, action);
}

GuardDecision McpGate::with_finance(GuardDecision d, const FinanceAction& a) {
  if (d.verdict == GuardVerdict::Deny || !options_.finance_ledger) return d;
  const FinanceVerdict f =
      judge_finance(a, options_.finance_limits, options_.finance_ledger->history(), options_.finance_ledger->now());
  if (f.verdict == GuardVerdict::Allow || (f.verdict == GuardVerdict::Approve && d.verdict == GuardVerdict::Approve))
    return d;
  return GuardDecision{f.verdict, f.rule, f.reason, enforcing(), false, false};
}

void McpGate::send_call(const std::string& line, const FinanceAction& a) {
  if (a.is_order() && options_.finance_ledger)
    if (auto st = options_.finance_ledger->record(a); !st)
      say("finance ledger " + options_.finance_ledger->path() + ": " + st.error().describe());
  options_.to_server(line);
}

nlohmann::json McpGate::check_tools(nlohmann::json result) {
  if (!result.is_object() || !result.contains("tools") || !result["tools"].is_array()) return result;
  nlohmann::json& tools = result["tools"];
  std::vector<std::pair<std::string, std::string>> listed;
  std::vector<bool> read_only, output_schema;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
    listed.emplace_back(t["name"].get<std::string>(), mcp_tool_hash(t));
    const auto* ann = t.contains("annotations") && t["annotations"].is_object() ? &t["annotations"] : nullptr;
    read_only.push_back(ann != nullptr && ann->contains("readOnlyHint") && (*ann)["readOnlyHint"] == true);
    output_schema.push_back(t.contains("outputSchema") && t["outputSchema"].is_object());
  }
  std::map<std::string, PinState> states;
  if (options_.pins) {
    auto checked = options_.pins->check(options_.server_name, listed);
    if (checked) {
      states = std::move(*checked);
    } else {
      // Fail safe: what cannot be checked counts as not pinned.
      say("pins " + options_.pins->file() + ": " + checked.error().describe() + "; every tool counts as new");
      for (const auto& [n, h] : listed) states[n] = PinState::New;
    }
  }
  std::set<std::string> hide;
  size_t first_sight = 0;
  for (size_t i = 0; i < listed.size(); ++i) {
    const auto& [tool, hash] = listed[i];
    const PinState s = states.count(tool) ? states[tool] : PinState::Pinned;
    bool fresh_finding = false;
    {
      std::lock_guard lock(mu_);
      Tool& known = tools_[tool];
      fresh_finding = (s == PinState::Changed || s == PinState::New) && (known.hash != hash || !known.hidden());
      known = Tool{hash, read_only[i], output_schema[i], s};
    }
    if (s == PinState::FirstSight) ++first_sight;
    if (s != PinState::Changed && s != PinState::New) continue;
    if (enforcing()) hide.insert(tool);
    if (!fresh_finding) continue;
    counts_.rug_pulls.fetch_add(1);
    record("mcp_finding", "tools/list", tool, GuardVerdict::Deny, "rug_pull");
    say("rug_pull: tool " + tool + " of server " + options_.server_name + " is " +
        (s == PinState::Changed ? "changed since it was pinned" : "new since the server's tools were pinned") +
        " (hash " + hash.substr(0, 12) + ")" + (enforcing() ? ": hidden, its calls denied" : " (monitor: shown)") +
        "; faultctl mcp-guard pins accept " + options_.server_name + " " + tool + " accepts it");
  }
  if (first_sight > 0)
    say("pinned " + std::to_string(first_sight) + " tool" + (first_sight == 1 ? "" : "s") + " of server " +
        options_.server_name + " (first sight) in " + (options_.pins ? options_.pins->file() : ""));
  if (!hide.empty()) {
    nlohmann::json kept = nlohmann::json::array();
    for (auto& t : tools)
      if (!(t.is_object() && t.contains("name") && t["name"].is_string() && hide.count(t["name"].get<std::string>())))
        kept.push_back(std::move(t));
    tools = std::move(kept);
  }
  return result;
}

void McpGate::refresh_tools(const std::string& cursor) {
  std::string id;
  {
    std::lock_guard lock(mu_);
    id = std::string(kOwnListPrefix) + std::to_string(++next_own_);
    own_lists_.insert(id_key(id));
  }
  nlohmann::json req = {{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/list"}};
  if (!cursor.empty()) req["params"] = {{"cursor", cursor}};
  options_.to_server(dump_line(req));
}

void McpGate::from_server(const McpLineReader::Line& line) {
  if (line.oversized) {
    counts_.bad_lines.fetch_add(1);
    say("a line from the server longer than 10 MiB: dropped");
    return;
  }
  McpMessage m = parse_mcp_message(line.text);
  if (m.kind == McpMessage::Kind::Response && !m.id.is_null()) {
    const std::string key = id_key(m.id);
    bool own = false, client_list = false;
    {
      std::lock_guard lock(mu_);
      own = own_lists_.erase(key) > 0;
      client_list = !own && client_lists_.erase(key) > 0;
    }
    if (own) {  // the gate's re-check: not the client's
      if (m.doc.contains("result")) {
        const nlohmann::json& r = m.doc["result"];
        (void)check_tools(r);
        if (r.is_object() && r.contains("nextCursor") && r["nextCursor"].is_string())
          refresh_tools(r["nextCursor"].get<std::string>());
      }
      return;
    }
    if (client_list && m.doc.contains("result")) {
      const size_t before =
          m.doc["result"].is_object() && m.doc["result"].contains("tools") && m.doc["result"]["tools"].is_array()
              ? m.doc["result"]["tools"].size()
              : 0;
      m.doc["result"] = check_tools(std::move(m.doc["result"]));
      const size_t after =
          m.doc["result"].is_object() && m.doc["result"].contains("tools") && m.doc["result"]["tools"].is_array()
              ? m.doc["result"]["tools"].size()
              : 0;
      if (after != before) return options_.to_client(dump_line(m.doc));
    }
  } else if (m.kind == McpMessage::Kind::Notification && m.method == "notifications/tools/list_changed") {
    options_.to_client(line.text);
    refresh_tools("");
    return;
  }
  options_.to_client(line.text);
}

}  // namespace faultline
