// The clients' MCP configuration files, read as ordered JSON (every other key
// and its order kept), their servers wrapped in `faultctl mcp-guard` or
// restored; what install changed is kept in the state folder, so uninstall
// puts back the very entry it replaced.
#include "ctl/mcp_install.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <variant>

#include "base/exit_code.h"
#include "base/files.h"
#include "ctl/command.h"
#include "ctl/flag_error.h"
#include "ctl/mcp_guard_args.h"

namespace faultline {
namespace mcp_install_impl {

using ojson = nlohmann::ordered_json;

struct ConfigFile {
  std::string client, path;
  bool exists = false;
  mode_t mode = 0600;
  std::string text;  // as read
  ojson doc;
};

// "line L, column C" of a byte offset (1-based, as editors count).
std::string position_of(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

Result<ConfigFile> read_config(const std::string& client, const std::string& path) {
  ConfigFile f{client, path};
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return f;  // not there: nothing to do
  f.exists = true;
  f.mode = st.st_mode & 07777;
  auto text = read_text_file(path);
  if (!text) return text.error();
  f.text = *text;
  try {
    f.doc = ojson::parse(*text);
  } catch (const ojson::parse_error& e) {
    std::string why = e.what();
    if (auto at = why.find("parse error"); at != std::string::npos) why = why.substr(at);
    return bad(path + ":" + position_of(*text, e.byte) + ": not JSON (" + why + "): left as it is");
  }
  if (!f.doc.is_object()) return bad(path + ": not a JSON object: left as it is");
  if (f.doc.contains("mcpServers") && !f.doc["mcpServers"].is_object())
    return bad(path + ": mcpServers is not an object: left as it is");
  return f;
}

bool is_wrapper(const ojson& e) {
  if (!e.is_object() || !e.contains("command") || !e["command"].is_string()) return false;
  const std::string cmd = e["command"].get<std::string>();
  const std::string base = cmd.substr(cmd.rfind('/') + 1);
  return base == "faultctl" && e.contains("args") && e["args"].is_array() && !e["args"].empty() &&
         e["args"][0] == "mcp-guard";
}

std::string safe_name(const std::string& n) {
  std::string out;
  for (char c : n)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '@' ? c : '_';
  return out.empty() ? "server" : out.substr(0, 64);
}

// The entry as `faultctl mcp-guard`: a stdio server's command goes after
// "--"; an HTTP server's URL and headers become --upstream-url and
// --upstream-header. Unknown keys (env, cwd, disabled, ...) stay.
std::optional<ojson> wrap(const std::string& name, const ojson& e, const McpInstallOptions& o) {
  if (!e.is_object() || is_wrapper(e)) return std::nullopt;
  std::vector<std::string> args = {"mcp-guard"};
  args.insert(args.end(), o.guard_flags.begin(), o.guard_flags.end());
  args.push_back("--server-name");
  args.push_back(safe_name(name));
  ojson out = ojson::object();
  if (e.contains("command") && e["command"].is_string()) {
    args.push_back("--");
    args.push_back(e["command"].get<std::string>());
    if (e.contains("args") && e["args"].is_array())
      for (const auto& a : e["args"]) {
        if (!a.is_string()) return std::nullopt;
        args.push_back(a.get<std::string>());
      }
    for (const auto& [k, v] : e.items()) out[k] = v;
  } else if (e.contains("url") && e["url"].is_string()) {
    args.push_back("--upstream-url");
    args.push_back(e["url"].get<std::string>());
    const std::string type = e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
    if (type == "sse") {
      args.push_back("--upstream-transport");
      args.push_back("sse");
    }
    if (e.contains("headers") && e["headers"].is_object())
      for (const auto& [k, v] : e["headers"].items()) {
        if (!v.is_string()) return std::nullopt;
        args.push_back("--upstream-header");
        args.push_back(k + ": " + v.get<std::string>());
      }
    for (const auto& [k, v] : e.items())
      if (k != "url" && k != "type" && k != "headers") out[k] = v;
    out["type"] = "stdio";
  } else {
    return std::nullopt;
  }
  out["command"] = o.faultctl;
  out["args"] = args;
  return out;
}

// A wrapper made without a record in the state folder, undone from its args.
ojson unwrap_from_args(const ojson& e) {
  ojson out = ojson::object();
  std::vector<std::string> args;
  for (const auto& a : e["args"]) args.push_back(a.is_string() ? a.get<std::string>() : "");
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes != args.end() && dashes + 1 != args.end()) {
    for (const auto& [k, v] : e.items()) out[k] = v;
    out["command"] = *(dashes + 1);
    out["args"] = std::vector<std::string>(dashes + 2, args.end());
    return out;
  }
  for (const auto& [k, v] : e.items())
    if (k != "command" && k != "args" && k != "type") out[k] = v;
  ojson headers = ojson::object();
  for (size_t i = 1; i + 1 < args.size(); ++i) {
    if (args[i] == "--upstream-url") out["url"] = args[i + 1];
    if (args[i] == "--upstream-transport" && args[i + 1] == "sse") out["type"] = "sse";
    if (args[i] == "--upstream-header") {
      const size_t colon = args[i + 1].find(':');
      if (colon != std::string::npos)
        headers[args[i + 1].substr(0, colon)] = args[i + 1].substr(args[i + 1].find_first_not_of(' ', colon + 1));
    }
  }
  if (!out.contains("type")) out["type"] = "http";
  if (!headers.empty()) out["headers"] = headers;
  return out;
}

// A trading, payment or broker server: a word of its name, command,
// arguments or URL names one (docs/gates.md lists them).
bool is_broker(const std::string& name, const ojson& e) {
  static const std::vector<std::string> kWords = {"alpaca",
                                                  "ibkr",
                                                  "interactive-brokers",
                                                  "interactivebrokers",
                                                  "tradier",
                                                  "schwab",
                                                  "etrade",
                                                  "robinhood",
                                                  "webull",
                                                  "tastytrade",
                                                  "coinbase",
                                                  "binance",
                                                  "kraken",
                                                  "bybit",
                                                  "okx",
                                                  "stripe",
                                                  "paypal",
                                                  "plaid",
                                                  "broker",
                                                  "trading",
                                                  "brokerage"};
  std::string text = name;
  for (const char* key : {"command", "url"})
    if (e.contains(key) && e[key].is_string()) text += " " + e[key].get<std::string>();
  if (e.contains("args") && e["args"].is_array())
    for (const auto& a : e["args"])
      if (a.is_string()) text += " " + a.get<std::string>();
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::any_of(kWords.begin(), kWords.end(),
                     [&](const std::string& w) { return text.find(w) != std::string::npos; });
}

// A broker's wrapper without an order value cap, or "".
std::string broker_weakness(const McpGuardArgs& a) {
  if (a.policy.mode != GuardMode::Enforce)
    return "weak: a broker server in monitor: its orders are logged, none is capped "
           "(--enforce with --max-order-value N or --finance-pack)";
  if (!a.finance.max_order_value)
    return "weak: a broker server with no order value cap (--max-order-value N or --finance-pack)";
  return "";
}

// What status says of one entry.
std::string verdict_of(const std::string& name, const ojson& e) {
  if (!e.is_object()) return "not an object: ignored";
  const bool broker =
      is_broker(name, e) || (is_wrapper(e) && std::any_of(e["args"].begin(), e["args"].end(), [](const ojson& a) {
                               return a == "--inspect-actions" || a == "--finance-pack";
                             }));
  if (is_wrapper(e)) {
    std::vector<std::string> args;
    for (size_t i = 1; i < e["args"].size(); ++i)
      args.push_back(e["args"][i].is_string() ? e["args"][i].get<std::string>() : "");
    auto parsed = parse_mcp_guard_args(args);
    if (!parsed) return "guarded, but the guard refuses its flags: " + parsed.error().message;
    if (!std::holds_alternative<McpGuardArgs>(*parsed)) return "guarded (help only): not a guard";
    const McpGuardArgs& a = std::get<McpGuardArgs>(*parsed);
    if (broker && !broker_weakness(a).empty()) return broker_weakness(a);
    size_t rules = 0;
    for (const auto& r : a.policy.rules) rules += r.is_mcp() ? 1 : 0;
    if (a.policy.mode != GuardMode::Enforce)
      return std::string("monitor: every call judged and logged, nothing blocked") + (a.dry_run ? " (dry run)" : "");
    if (rules == 0 && a.policy.default_allow && !a.dry_run && !a.finance.max_order_value)
      return "weak: enforcing, but no rule and default allow: every call passes";
    return "guarded: enforce, default " + std::string(a.policy.default_allow ? "allow" : "deny") + ", " +
           std::to_string(rules) + " tool rule" + (rules == 1 ? "" : "s") + (a.dry_run ? ", dry run" : "") +
           (a.finance.max_order_value ? ", orders capped at " + format_finance_amount(*a.finance.max_order_value) : "");
  }
  const std::string broker_hint = broker ? " (a broker server: install -- --enforce --finance-pack)" : "";
  if (e.contains("command")) return "unguarded (stdio): install wraps it" + broker_hint;
  if (e.contains("url")) return "unguarded (http): install wraps it (--upstream-url)" + broker_hint;
  return "unknown entry (no command, no url): left alone";
}

std::string state_file(const McpInstallOptions& o) { return o.state_dir + "/mcp-install.json"; }

}  // namespace mcp_install_impl

using namespace mcp_install_impl;

std::vector<std::pair<std::string, std::string>> mcp_client_configs(const McpInstallOptions& o) {
  return {
      {"Claude Desktop", o.config_home + "/Claude/claude_desktop_config.json"},
      {"Claude Code (user)", o.home + "/.claude.json"},
      {"Claude Code (project)", o.project + "/.mcp.json"},
      {"Cursor (global)", o.home + "/.cursor/mcp.json"},
      {"Cursor (project)", o.project + "/.cursor/mcp.json"},
  };
}

int run_mcp_install(const McpInstallOptions& o) {
  std::vector<ConfigFile> files;
  bool malformed = false;
  for (const auto& [client, path] : mcp_client_configs(o)) {
    auto f = read_config(client, path);
    if (!f) {
      std::cerr << "faultctl mcp-guard " << o.verb << ": "
                << (f.error().bad_input ? f.error().message : f.error().describe()) << "\n";
      if (!f.error().bad_input) return 1;
      malformed = true;
      continue;
    }
    files.push_back(std::move(*f));
  }
  if (o.verb == "status") {
    for (const auto& f : files) {
      if (!f.exists) continue;
      std::cout << f.client << ": " << f.path << "\n";
      if (!f.doc.contains("mcpServers") || f.doc["mcpServers"].empty()) std::cout << "  (no MCP servers)\n";
      if (f.doc.contains("mcpServers"))
        for (const auto& [name, e] : f.doc["mcpServers"].items())
          std::cout << "  " << name << ": " << verdict_of(name, e) << "\n";
    }
    return malformed ? int(kExitBadInput) : int(kExitCompleted);
  }
  if (malformed) {
    std::cerr << "faultctl mcp-guard " << o.verb << ": nothing changed in any file\n";
    return kExitBadInput;
  }
  // What install replaced: {"servers": {file: {server: {"original", "wrapped"}}},
  // "files": {file: {"before", "after"}}}: uninstall puts a file back byte for
  // byte when nobody changed it since, else each entry as it was.
  ojson state = ojson::object();
  if (auto text = read_text_file(state_file(o)); text) {
    state = ojson::parse(*text, nullptr, false);
    if (!state.is_object()) state = ojson::object();
  }
  if (!state.contains("servers") || !state["servers"].is_object()) state["servers"] = ojson::object();
  if (!state.contains("files") || !state["files"].is_object()) state["files"] = ojson::object();
  ojson& servers = state["servers"];
  ojson& file_texts = state["files"];
  size_t changed = 0, files_changed = 0;
  std::vector<ConfigFile> updated;
  updated.reserve(files.size());
  for (const auto& f : files) {
    if (!f.exists || !f.doc.contains("mcpServers")) continue;
    ConfigFile next = f;
    bool any = false;
    // The file as install found it, if it is still as install left it.
    const bool as_left = file_texts.contains(f.path) && file_texts[f.path]["after"] == f.text;
    ojson before_doc;
    if (o.verb == "uninstall" && as_left) {
      before_doc = ojson::parse(file_texts[f.path]["before"].get<std::string>(), nullptr, false);
      if (!before_doc.is_object() || !before_doc.contains("mcpServers")) before_doc = ojson();
    }
    for (auto& [name, e] : next.doc["mcpServers"].items()) {
      std::optional<ojson> after;
      if (o.verb == "install") {
        after = wrap(name, e, o);
        if (after) servers[f.path][name] = {{"original", e}, {"wrapped", *after}};
      } else if (is_wrapper(e)) {
        const ojson* rec =
            servers.contains(f.path) && servers[f.path].contains(name) ? &servers[f.path][name] : nullptr;
        after = rec != nullptr && (*rec)["wrapped"] == e ? (*rec)["original"] : unwrap_from_args(e);
        if (servers.contains(f.path)) servers[f.path].erase(name);
      }
      if (!after) continue;
      if (!any) std::cout << "--- " << f.path << " (" << f.client << ")\n+++ " << f.path << "\n";
      std::cout << "-  \"" << name << "\": " << e.dump() << "\n+  \"" << name << "\": " << after->dump() << "\n";
      e = std::move(*after);
      any = true;
      ++changed;
    }
    if (any) {
      ++files_changed;
      std::string text = next.doc.dump(2) + "\n";
      if (o.verb == "uninstall" && as_left && before_doc.is_object() && before_doc == next.doc)
        text = file_texts[f.path]["before"].get<std::string>();  // byte for byte
      if (o.verb == "install") {
        // The first "before" stands while the file stays as install left it.
        if (!as_left) file_texts[f.path]["before"] = f.text;
        file_texts[f.path]["after"] = text;
      } else {
        file_texts.erase(f.path);
      }
      next.text = std::move(text);
      updated.push_back(std::move(next));
    }
  }
  if (changed == 0) {
    std::cout << (o.verb == "install" ? "every server is wrapped already (or there is none): nothing to change\n"
                                      : "no server is wrapped: nothing to change\n");
    return kExitCompleted;
  }
  if (!o.apply) {
    std::cout << changed << " server" << (changed == 1 ? "" : "s") << " in " << files_changed << " file"
              << (files_changed == 1 ? "" : "s") << ": nothing written (--apply writes it)\n";
    return kExitCompleted;
  }
  for (const auto& f : updated) {
    if (auto st = write_file_atomic(f.path, f.text); !st)
      return report_error("faultctl mcp-guard " + o.verb, st.error());
    (void)::chmod(f.path.c_str(), f.mode);
  }
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  // The record holds the files as they were (a header's token, say): a private folder.
  if (auto st = ensure_private_dir(o.state_dir, true); !st)
    return report_error("faultctl mcp-guard " + o.verb, st.error());
  if (auto st = write_file_atomic(state_file(o), state.dump(2) + "\n"); !st)
    std::cerr << "faultctl mcp-guard " << o.verb << ": the record for uninstall: " << st.error().describe() << "\n";
  std::cout << (o.verb == "install" ? "wrapped " : "restored ") << changed << " server" << (changed == 1 ? "" : "s")
            << " in " << files_changed << " file" << (files_changed == 1 ? "" : "s")
            << "; restart the clients to use it\n";
  return kExitCompleted;
}

}  // namespace faultline
