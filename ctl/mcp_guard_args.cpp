// `faultctl mcp-guard` flags: cxxopts tokenises, we explain; rules from the
// flags or a policy file's guard section, checked before the server starts.
#include "ctl/mcp_guard_args.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cxxopts.hpp>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "userspace/guard_runtime/guard_capture.h"

namespace faultline {
namespace mcp_guard_args_impl {

constexpr Example kMcpGuardExamples[] = {
    {"monitor: every tools/call of the filesystem server logged, nothing blocked",
     "faultctl mcp-guard --json-log mcp.jsonl -- npx @modelcontextprotocol/server-filesystem /srv"},
    {"enforce: write_file and move_file refused, the rest allowed",
     "faultctl mcp-guard --enforce --deny-tool write_file --deny-tool move_file -- node server.js"},
    {"enforce: only read_* tools; delete_* waits for faultctl approvals",
     "faultctl mcp-guard --enforce --default-deny --allow-tool 'read_*' --approve-tool 'delete_*' -- ./mcp-server"},
    {"calls to tools not annotated read-only answer \"would execute\"",
     "faultctl mcp-guard --dry-run -- node server.js"},
    {"the server's tools as pinned, and what changed (pending)", "faultctl mcp-guard pins list"},
    {"a remote server over HTTP; its token from the environment",
     "faultctl mcp-guard --enforce --deny-tool 'delete_*' --upstream-url https://mcp.example.com/mcp "
     "--upstream-header 'Authorization: Bearer ${MCP_TOKEN}'"},
    {"the agent over HTTP at 127.0.0.1:8931/mcp, the server on stdio",
     "faultctl mcp-guard --listen 127.0.0.1:8931 -- node server.js"},
    {"every call reported to faultcp, for its MCP server inventory",
     "faultctl mcp-guard --control-plane https://faultcp.example.com --token $AGENT_TOKEN -- node server.js"},
    {"a broker: orders over 5000 denied, over 500 held, withdrawals denied",
     "faultctl mcp-guard --enforce --finance-pack --max-order-value 5000 --approve-over 500 -- uvx alpaca-mcp-server"},
};

constexpr const char* kMcpPinsUsage =
    "usage: faultctl mcp-guard pins list [--json] [--state-dir DIR]\n"
    "       faultctl mcp-guard pins accept SERVER [TOOL] [--state-dir DIR]\n"
    "       faultctl mcp-guard pins reset SERVER [--state-dir DIR]\n"
    "  the pinned definition hash of each MCP server's tools (DIR/mcp-pins.json).\n"
    "  list: every server's tools, pinned and pending (changed or new since pinned);\n"
    "  accept: pin what is pending (one tool, or all of the server's); reset: forget\n"
    "  the server's pins (its next tools/list is pinned afresh). Exit 0 done, 1 an\n"
    "  error, 2 bad input or nothing to accept or reset.\n";

constexpr Example kMcpPinsExamples[] = {
    {"what is pinned, and what changed", "faultctl mcp-guard pins list"},
    {"the new description of write_file is fine", "faultctl mcp-guard pins accept fs write_file"},
    {"pin the server's tools afresh at its next list", "faultctl mcp-guard pins reset fs"},
};

// The flags a policy file replaces.
constexpr const char* kMcpPolicyFlags[] = {"enforce", "default-deny", "allow-tool", "deny-tool", "approve-tool"};

Result<Parsed<McpGuardArgs>> parse_pins_args(const std::vector<std::string>& args) {
  auto help = [] { return Parsed<McpGuardArgs>(HelpText{with_examples(kMcpPinsUsage, kMcpPinsExamples)}); };
  if (args.size() < 2) return bad("pins: give list, accept SERVER [TOOL] or reset SERVER");
  McpGuardArgs a;
  a.pins_verb = args[1];
  if (a.pins_verb == "-h" || a.pins_verb == "--help") return help();
  if (a.pins_verb != "list" && a.pins_verb != "accept" && a.pins_verb != "reset")
    return bad("pins: unknown subcommand '" + a.pins_verb + "' (list, accept SERVER [TOOL], reset SERVER)");
  std::vector<std::string> words;
  for (size_t i = 2; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help") return help();
    if (w == "--json" && a.pins_verb == "list") {
      a.json = true;
    } else if (w == "--state-dir") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return bad("pins: --state-dir needs a folder");
      a.state_dir = args[++i];
    } else if (w.starts_with("-")) {
      return bad("pins " + a.pins_verb + ": unknown flag " + w);
    } else {
      words.push_back(w);
    }
  }
  const size_t most = a.pins_verb == "list" ? 0 : a.pins_verb == "accept" ? 2 : 1;
  const size_t least = a.pins_verb == "list" ? 0 : 1;
  if (words.size() < least) return bad("pins " + a.pins_verb + ": give the SERVER (as pins list names it)");
  if (words.size() > most) return bad("pins " + a.pins_verb + ": unexpected '" + words[most] + "'");
  if (!words.empty()) a.server = words[0];
  if (words.size() > 1) a.tool = words[1];
  return Parsed<McpGuardArgs>(std::move(a));
}

constexpr const char* kMcpInstallUsage =
    "usage: faultctl mcp-guard install [--apply] [--project DIR] [--state-dir DIR] [-- GUARD FLAGS]\n"
    "       faultctl mcp-guard status [--project DIR]\n"
    "       faultctl mcp-guard uninstall [--apply] [--project DIR] [--state-dir DIR]\n"
    "  the MCP servers of Claude Desktop ($XDG_CONFIG_HOME/Claude/claude_desktop_config.json),\n"
    "  Claude Code (~/.claude.json, DIR/.mcp.json) and Cursor (~/.cursor/mcp.json,\n"
    "  DIR/.cursor/mcp.json; DIR is the current folder unless --project).\n"
    "  install: each server wrapped in faultctl mcp-guard GUARD FLAGS (default: monitor);\n"
    "  uninstall: each wrapped server as it was; status: each server's verdict.\n"
    "  A diff unless --apply; --apply replaces each file atomically, every other key kept.\n"
    "  A file that is not JSON is named with its line and column, and nothing is written.\n"
    "  Exit 0 done, 1 an error, 2 bad input.\n";

constexpr Example kMcpInstallExamples[] = {
    {"what install would change (a diff, nothing written)", "faultctl mcp-guard install"},
    {"wrap every server, enforcing a deny rule",
     "faultctl mcp-guard install --apply -- --enforce --deny-tool 'delete_*'"},
    {"each server's verdict", "faultctl mcp-guard status"},
    {"every server as it was", "faultctl mcp-guard uninstall --apply"},
};

Result<Parsed<McpGuardArgs>> parse_install_args(const std::vector<std::string>& args) {
  McpGuardArgs a;
  a.install_verb = args[0];
  size_t i = 1;
  for (; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help")
      return Parsed<McpGuardArgs>(HelpText{with_examples(kMcpInstallUsage, kMcpInstallExamples)});
    if (w == "--") break;
    if (w == "--apply" && a.install_verb != "status") {
      a.apply = true;
    } else if (w == "--project" || w == "--state-dir") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return bad(a.install_verb + ": " + w + " needs a folder");
      (w == "--project" ? a.project : a.state_dir) = args[++i];
    } else {
      return bad(a.install_verb + ": unknown flag or word '" + w + "'");
    }
  }
  if (i < args.size()) {
    if (a.install_verb != "install") return bad(a.install_verb + ": takes no guard flags after --");
    a.guard_flags.assign(args.begin() + static_cast<long>(i) + 1, args.end());
    for (const auto& f : a.guard_flags)
      if (f == "--" || f == "--server-name" || f == "--upstream-url" || f == "--listen" || f.starts_with("--upstream-"))
        return bad("install: " + f + " is set by install for each server: not among the guard flags");
    // The flags as each wrapper will run them: refused now, not at the client's start.
    std::vector<std::string> probe = a.guard_flags;
    probe.insert(probe.end(), {"--", "server"});
    auto r = parse_mcp_guard_args(probe);
    if (!r) return bad("install: the guard flags: " + r.error().message);
  }
  return Parsed<McpGuardArgs>(std::move(a));
}

// A path's name for a server: its last part without "@version" or extension;
// a generic part (index.js, dist/, build/) gives way to the folder above it,
// so ".../server-filesystem/dist/index.js" is server-filesystem.
std::string base_word(const std::string& w) {
  static const std::vector<std::string> kGeneric = {"index", "main", "cli", "server", "dist", "build",
                                                    "lib",   "src",  "bin", "out",    "app"};
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= w.size()) {
    size_t slash = w.find('/', start);
    if (slash == std::string::npos) slash = w.size();
    std::string part = w.substr(start, slash - start);
    if (auto at = part.find('@', 1); at != std::string::npos) part = part.substr(0, at);  // "pkg@1.2.3"
    if (auto dot = part.find('.'); dot != std::string::npos && dot > 0) part = part.substr(0, dot);
    if (!part.empty() && part != "." && part != ".." && part[0] != '@') parts.push_back(part);
    start = slash + 1;
  }
  if (parts.empty()) return w;
  for (size_t i = parts.size(); i-- > 0;)
    if (std::find(kGeneric.begin(), kGeneric.end(), parts[i]) == kGeneric.end()) return parts[i];
  return parts.back();
}

// A server name: letters, digits and "-_.@", 1-64.
Status check_server_name(const std::string& n) {
  if (n.empty() || n.size() > 64 ||
      n.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@") != std::string::npos)
    return bad("--server-name '" + n + "': letters, digits, '-', '_', '.' and '@', at most 64");
  return {};
}

// ${NAME} in a header's value: each closed, each a variable name.
Status check_header_env(const std::string& v) {
  for (size_t i = v.find("${"); i != std::string::npos; i = v.find("${", i + 2)) {
    const size_t end = v.find('}', i + 2);
    if (end == std::string::npos) return bad("--upstream-header: '${' without its '}'");
    const std::string name = v.substr(i + 2, end - i - 2);
    if (name.empty() ||
        name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
      return bad("--upstream-header: '${" + name + "}' is not a variable name (letters, digits, '_')");
  }
  return {};
}

// --fault-tool with --fault-error or --fault-delay, --fault-pct; --trace.
Status read_fault_flags(const cxxopts::ParseResult& r, McpGuardArgs& a) {
  if (r.count("trace")) {
    a.trace = r["trace"].as<std::string>();
    if (a.trace.empty()) return bad("--trace: empty file name");
  }
  if (!r.count("fault-tool")) {
    for (const char* f : {"fault-error", "fault-delay", "fault-pct"})
      if (r.count(f)) return bad(std::string("--") + f + " goes with --fault-tool");
    return {};
  }
  a.fault.tool = r["fault-tool"].as<std::string>();
  if (auto st = check_mcp_glob(a.fault.tool); !st) return bad("--fault-tool " + st.error().message);
  if (r.count("fault-error") == r.count("fault-delay"))
    return bad("--fault-tool: give one of --fault-error TEXT or --fault-delay D");
  if (r.count("fault-error")) {
    a.fault.error_text = r["fault-error"].as<std::string>();
    if (a.fault.error_text.empty() || a.fault.error_text.size() > 4096)
      return bad("--fault-error: a text of 1 to 4096 bytes");
  } else {
    auto ns = with_flag("fault-delay", parse_duration_ns(r["fault-delay"].as<std::string>()));
    if (!ns) return ns.error();
    if (*ns < 1'000'000 || *ns > 600'000'000'000ULL) return bad("--fault-delay: from 1ms to 10m");
    a.fault.delay_ns = *ns;
  }
  if (r.count("fault-pct")) {
    auto p = with_flag("fault-pct", parse_percent(r["fault-pct"].as<std::string>()));
    if (!p) return p.error();
    if (*p <= 0) return bad("--fault-pct: above 0 (up to 100)");
    a.fault.pct = *p;
  }
  return {};
}

// --upstream-url, --upstream-transport, --upstream-header, --listen, --allow-remote.
Status read_bridge_flags(const cxxopts::ParseResult& r, McpGuardArgs& a) {
  if (r.count("upstream-url")) {
    a.upstream_url = r["upstream-url"].as<std::string>();
    if (!a.upstream_url.starts_with("http://") && !a.upstream_url.starts_with("https://"))
      return bad("--upstream-url '" + a.upstream_url + "': an http:// or https:// URL");
    if (a.upstream_url.find_first_of(" \t\r\n") != std::string::npos)
      return bad("--upstream-url: a URL without spaces or line breaks");
  }
  for (const char* flag : {"upstream-transport", "upstream-header"})
    if (r.count(flag) && a.upstream_url.empty()) return bad(std::string("--") + flag + " goes with --upstream-url");
  if (r.count("upstream-transport")) {
    const std::string t = r["upstream-transport"].as<std::string>();
    if (t != "streamable" && t != "sse") return bad("--upstream-transport '" + t + "': streamable or sse");
    a.upstream_sse = t == "sse";
  }
  if (r.count("upstream-header")) {
    for (const auto& h : r["upstream-header"].as<std::vector<std::string>>()) {
      const size_t colon = h.find(':');
      const std::string name = h.substr(0, colon);
      if (colon == std::string::npos || name.empty() ||
          name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_!#$%&'*+.^`|~") !=
              std::string::npos)
        return bad("--upstream-header: 'Name: value' (a header name, a colon, its value)");
      std::string lower = name;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (const char* own : {"content-type", "content-length", "accept", "mcp-session-id", "mcp-protocol-version",
                              "host", "transfer-encoding"})
        if (lower == own) return bad("--upstream-header " + name + ": the guard sets this header itself");
      // Checked now (a bad ${...} is bad input); expanded when the guard starts.
      FL_TRY(check_header_env(h.substr(colon + 1)));
      a.upstream_headers.push_back(h);
    }
  }
  if (r.count("listen")) {
    a.listen = r["listen"].as<std::string>();
    if (a.listen.empty() || a.listen.rfind(':') == std::string::npos)
      return bad("--listen '" + a.listen + "': HOST:PORT (127.0.0.1:8931; port 0 for any)");
  }
  a.allow_remote = r.count("allow-remote") > 0;
  if (a.allow_remote && a.listen.empty()) return bad("--allow-remote goes with --listen");
  return read_fault_flags(r, a);
}

// An amount flag: above 0, as parse_finance_amount() reads it.
Result<double> finance_amount_flag(const cxxopts::ParseResult& r, const char* flag) {
  const std::string text = r[flag].as<std::string>();
  const auto v = parse_finance_amount(text);
  if (!v || *v <= 0) return bad(std::string("--") + flag + " '" + text + "': an amount above 0 (2500, 2500.50)");
  return *v;
}

// --inspect-actions, --finance-pack and the limits (each implies --inspect-actions).
Status read_finance_flags(const cxxopts::ParseResult& r, McpGuardArgs& a) {
  FinanceLimits& l = a.finance;
  const bool pack = r.count("finance-pack") > 0;
  if (pack) l = finance_pack_defaults();
  a.inspect_actions = pack || r.count("inspect-actions") > 0;
  for (const auto& [flag, field] :
       {std::pair{"max-order-value", &l.max_order_value}, std::pair{"approve-over", &l.approve_over},
        std::pair{"daily-limit", &l.daily_limit}}) {
    if (!r.count(flag)) continue;
    auto v = finance_amount_flag(r, flag);
    if (!v) return v.error();
    *field = *v;
    a.inspect_actions = true;
  }
  if (r.count("max-orders-per-hour")) {
    const std::string t = r["max-orders-per-hour"].as<std::string>();
    if (t.empty() || t.size() > 7 || t.find_first_not_of("0123456789") != std::string::npos || std::stoul(t) == 0)
      return bad("--max-orders-per-hour '" + t + "': a whole number from 1 to 9999999");
    l.max_orders_per_hour = std::stoul(t);
    a.inspect_actions = true;
  }
  if (r.count("outlier-factor")) {
    const std::string t = r["outlier-factor"].as<std::string>();
    const auto f = parse_finance_amount(t);
    if (!f || *f <= 1 || *f > 1000 || t.starts_with("$"))
      return bad("--outlier-factor '" + t + "': a number above 1, at most 1000 (3, 2.5)");
    l.outlier_factor = *f;
    a.inspect_actions = true;
  }
  if (r.count("deny-account-danger")) l.deny_account_danger = a.inspect_actions = true;
  if (r.count("market-hours")) l.market_hours = a.inspect_actions = true;
  if (l.approve_over && l.max_order_value && *l.approve_over >= *l.max_order_value)
    return bad("--approve-over " + format_finance_amount(*l.approve_over) + ": at or over --max-order-value " +
               format_finance_amount(*l.max_order_value) + (pack ? " (with --finance-pack's defaults)" : "") +
               ": every order it would hold is denied; give it below the cap");
  return {};
}

}  // namespace mcp_guard_args_impl

using namespace mcp_guard_args_impl;

std::string mcp_server_name_of(const std::vector<std::string>& command) {
  if (command.empty()) return "server";
  static const std::vector<std::string> kRunners = {"node", "nodejs", "python", "python3", "npx", "uvx", "deno",
                                                    "bun",  "uv",     "pipx",   "bunx",    "run", "exec"};
  std::string name = base_word(command[0]);
  const std::string runner = command[0].substr(command[0].rfind('/') + 1);
  if (std::find(kRunners.begin(), kRunners.end(), runner) != kRunners.end()) {
    for (size_t i = 1; i < command.size(); ++i) {
      const std::string& w = command[i];
      if (w.empty() || w[0] == '-' || w == "run" || w == "exec") continue;
      name = base_word(w);
      break;
    }
  }
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '@' ? c : '_';
  return out.empty() ? "server" : out.substr(0, 64);
}

std::string mcp_server_name_of_url(const std::string& url) {
  std::string rest = url.substr(url.find("://") == std::string::npos ? 0 : url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);  // no user:password
  std::string out;
  for (char c : rest)
    if (c != '[' && c != ']') out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  return out.empty() ? "server" : out.substr(0, 64);
}

Result<Parsed<McpGuardArgs>> parse_mcp_guard_args(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "pins") return parse_pins_args(args);
  if (!args.empty() && (args[0] == "install" || args[0] == "status" || args[0] == "uninstall"))
    return parse_install_args(args);
  cxxopts::Options o("faultctl mcp-guard", "Guard the tool calls between an agent and a stdio MCP server.");
  o.add_options()("enforce", "act on the verdicts (default: monitor, decide and log only)")(
      "default-deny", "deny the calls no rule allows (default: allow)")(
      "allow-tool", "T: allow calls to tools matching the glob T ('read_*'), repeatable",
      cxxopts::value<std::vector<std::string>>())("deny-tool", "T: deny calls to tools matching T, repeatable",
                                                  cxxopts::value<std::vector<std::string>>())(
      "approve-tool", "T: hold calls to tools matching T until faultctl approvals approve|deny ID, repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "approve-timeout", "a held call is denied after this long (default 120s)", cxxopts::value<std::string>())(
      "server-name", "N: the server's name in the pins, the activity log and approvals (default: from the command)",
      cxxopts::value<std::string>())("identity", "who the activity log and approvals name (default USER@HOST)",
                                     cxxopts::value<std::string>())(
      "json-log", "FILE: append every call and decision to this hash-chained activity log",
      cxxopts::value<std::string>())(
      "policy",
      "FILE: the rules of a policy file's guard section (spec.guard, or the bare {mode, default_allow, rules}) "
      "instead of --enforce, --default-deny and the --*-tool flags",
      cxxopts::value<std::string>())(
      "state-dir", "DIR: where the tool pins are kept (DIR/mcp-pins.json; default: the guard's state folder)",
      cxxopts::value<std::string>())(
      "dry-run", "answer calls to tools not annotated read-only with \"would execute\" instead of sending them")(
      "upstream-url", "U: a remote MCP server at this http(s) URL instead of a command", cxxopts::value<std::string>())(
      "upstream-transport", "streamable (MCP's Streamable HTTP, the default) or sse (the older HTTP+SSE)",
      cxxopts::value<std::string>())(
      "upstream-header",
      "'Name: value' sent to the --upstream-url with every request, ${VAR} taken from the environment "
      "(never logged), repeatable",
      cxxopts::value<std::vector<std::string>>())(
      "listen", "ADDR: serve MCP's Streamable HTTP at http://ADDR/mcp for the client instead of stdio",
      cxxopts::value<std::string>())("allow-remote", "let --listen take an address that is not loopback")(
      "fault-tool", "T: inject a fault into the allowed calls to tools matching the glob T",
      cxxopts::value<std::string>())("fault-error", "TEXT: the faulted call is answered isError with TEXT, unsent",
                                     cxxopts::value<std::string>())(
      "fault-delay", "D: the faulted call is sent D later (500ms, 2s)", cxxopts::value<std::string>())(
      "fault-pct", "P: fault this share of the matching calls (default 100)", cxxopts::value<std::string>())(
      "trace", "FILE: append every message the guard passes, both ways, redacted, one JSON line each",
      cxxopts::value<std::string>())(
      "control-plane",
      "URL: faultcp (or FAULTLINE_CP): every call's activity line is reported there (its MCP server inventory), "
      "spooled in the state folder while it is down",
      cxxopts::value<std::string>())("token", "T: --control-plane's token, an agent token (or FAULTLINE_CP_TOKEN)",
                                     cxxopts::value<std::string>())(
      "inspect-actions",
      "classify each tools/call of a trading, payment or broker server (order place/cancel/modify, transfer, "
      "withdraw, account setting) and log its facts (symbol, side, quantity, price, value)")(
      "finance-pack",
      "--inspect-actions with the defaults: --max-order-value 10000 --approve-over 1000 --daily-limit 50000 "
      "--max-orders-per-hour 20 --outlier-factor 5 --deny-account-danger --market-hours (each flag given wins)")(
      "max-order-value", "N: deny an order whose value (notional, or quantity x limit price) is over N",
      cxxopts::value<std::string>())("approve-over", "N: hold an order whose value is over N for approval",
                                     cxxopts::value<std::string>())(
      "daily-limit", "N: deny an order that takes the UTC day's orders (kept across restarts) over N",
      cxxopts::value<std::string>())("max-orders-per-hour", "N: deny an order after N in the last hour",
                                     cxxopts::value<std::string>())(
      "outlier-factor", "F: hold an order over F times the median of this session's orders (3 or more)",
      cxxopts::value<std::string>())(
      "deny-account-danger",
      "deny withdrawals, transfers out, and changes of bank details, API keys, 2FA, margin or options level")(
      "market-hours", "hold orders outside NYSE regular hours (09:30-16:00 America/New_York, Monday to Friday)")(
      "h,help", "help");
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<McpGuardArgs>(HelpText{
        with_examples(o.help() + "\n  -- COMMAND ARGS   the MCP server to start (it speaks on its stdin and stdout)\n" +
                          "\n  faultctl mcp-guard pins list|accept|reset ...   the tool pins (pins --help)\n" +
                          "  faultctl mcp-guard install|status|uninstall ...   the clients' configs (install --help)\n",
                      kMcpGuardExamples)});
  McpGuardArgs a;
  FL_TRY(read_bridge_flags(*r, a));
  FL_TRY(read_finance_flags(*r, a));
  if (cmd.empty() && a.upstream_url.empty())
    return bad("missing the server's command: faultctl mcp-guard [flags] -- COMMAND ARGS (or --upstream-url U)");
  if (!cmd.empty() && !a.upstream_url.empty())
    return bad("--upstream-url and a command (after --) both name the server: give one");
  a.command = cmd;
  if (r->count("policy")) {
    for (const char* flag : kMcpPolicyFlags)
      if (r->count(flag))
        return bad(std::string("--") + flag + " comes from the policy file with --policy; write it there");
    a.policy_file = (*r)["policy"].as<std::string>();
    if (a.policy_file.empty()) return bad("--policy: empty file name");
    auto p = read_guard_policy_file(a.policy_file);
    if (!p) return bad("--policy " + p.error().message);
    a.policy = std::move(*p);
  }
  if (r->count("enforce")) a.policy.mode = GuardMode::Enforce;
  if (r->count("default-deny")) a.policy.default_allow = false;
  for (const char* flag : {"deny-tool", "approve-tool", "allow-tool"}) {
    if (!r->count(flag)) continue;
    const std::string f(flag);
    const GuardVerdict action = f == "allow-tool"  ? GuardVerdict::Allow
                                : f == "deny-tool" ? GuardVerdict::Deny
                                                   : GuardVerdict::Approve;
    for (const auto& t : (*r)[flag].as<std::vector<std::string>>()) {
      if (auto st = check_mcp_glob(t); !st) return bad("--" + f + " " + st.error().message);
      GuardRule rule;
      rule.name = "--" + f + " " + t;
      rule.action = action;
      rule.mcp_tool = t;
      a.policy.rules.push_back(std::move(rule));
    }
  }
  if (r->count("approve-timeout")) {
    auto ns = with_flag("approve-timeout", parse_duration_ns((*r)["approve-timeout"].as<std::string>()));
    if (!ns) return ns.error();
    if (*ns < 1'000'000) return bad("--approve-timeout must be at least 1ms");
    a.approve_timeout = std::chrono::milliseconds(*ns / 1'000'000);
  }
  if (r->count("server-name")) {
    a.server_name = (*r)["server-name"].as<std::string>();
    FL_TRY(check_server_name(a.server_name));
  } else {
    a.server_name = cmd.empty() ? mcp_server_name_of_url(a.upstream_url) : mcp_server_name_of(cmd);
  }
  if (r->count("identity")) {
    a.identity = (*r)["identity"].as<std::string>();
    if (a.identity.empty()) return bad("--identity: empty");
  } else {
    const passwd* pw = ::getpwuid(::geteuid());
    char host[256] = {};
    (void)::gethostname(host, sizeof host - 1);
    a.identity = std::string(pw != nullptr ? pw->pw_name : std::to_string(::geteuid())) + "@" + host;
  }
  if (r->count("json-log")) {
    a.json_log = (*r)["json-log"].as<std::string>();
    if (a.json_log.empty()) return bad("--json-log: empty file name");
  }
  if (r->count("state-dir")) {
    a.state_dir = (*r)["state-dir"].as<std::string>();
    if (a.state_dir.empty()) return bad("--state-dir: empty");
  }
  a.dry_run = r->count("dry-run") > 0;
  if (r->count("control-plane")) {
    a.cp_url = (*r)["control-plane"].as<std::string>();
    if (a.cp_url.empty()) return bad("--control-plane: empty URL");
    if (r->count("token")) a.cp_token = (*r)["token"].as<std::string>();
    if (a.cp_token.empty())
      return bad("--control-plane needs --token (or FAULTLINE_CP_TOKEN): an agent token of the workspace");
  } else if (r->count("token")) {
    return bad("--token goes with --control-plane");
  }
  return Parsed<McpGuardArgs>(std::move(a));
}

}  // namespace faultline
