// faultctl mcp-guard's flags: what each gives, and every bad one refused with
// one line naming it.
#include "ctl/mcp_guard_args.h"

#include <gtest/gtest.h>

#include <variant>

namespace faultline {
namespace {

McpGuardArgs parsed_mcp(const std::vector<std::string>& words) {
  auto r = parse_mcp_guard_args(words);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok() || !std::holds_alternative<McpGuardArgs>(*r)) return {};
  return std::get<McpGuardArgs>(*r);
}

std::string mcp_error(const std::vector<std::string>& words) {
  auto r = parse_mcp_guard_args(words);
  if (r.ok()) return "(accepted)";
  EXPECT_TRUE(r.error().bad_input);
  return r.error().message;
}

TEST(McpGuardArgs, ToolFlagsBecomeRules) {
  McpGuardArgs a = parsed_mcp({"--enforce", "--default-deny", "--allow-tool", "read_*", "--deny-tool", "write_file",
                               "--approve-tool", "move_*", "--server-name", "fs", "--dry-run", "--", "node", "s.js"});
  EXPECT_EQ(a.policy.mode, GuardMode::Enforce);
  EXPECT_FALSE(a.policy.default_allow);
  ASSERT_EQ(a.policy.rules.size(), 3u);
  EXPECT_EQ(a.policy.rules[0].name, "--deny-tool write_file");
  EXPECT_EQ(a.policy.rules[1].action, GuardVerdict::Approve);
  EXPECT_EQ(a.policy.rules[2].mcp_tool, "read_*");
  EXPECT_EQ(a.server_name, "fs");
  EXPECT_TRUE(a.dry_run);
  EXPECT_EQ(a.command, (std::vector<std::string>{"node", "s.js"}));
}

TEST(McpGuardArgs, ServerNameFromTheCommand) {
  EXPECT_EQ(mcp_server_name_of({"npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"}), "server-filesystem");
  EXPECT_EQ(mcp_server_name_of({"node", "build/index.js"}), "index");
  EXPECT_EQ(
      mcp_server_name_of({"node", "/x/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/srv"}),
      "server-filesystem");
  EXPECT_EQ(mcp_server_name_of({"python3", "-m", "mcp_server_time"}), "mcp_server_time");
  EXPECT_EQ(mcp_server_name_of({"/usr/local/bin/github-mcp", "stdio"}), "github-mcp");
  EXPECT_EQ(mcp_server_name_of({"uvx", "mcp-server-git@1.2"}), "mcp-server-git");
}

TEST(McpGuardArgs, PinsSubcommands) {
  McpGuardArgs a = parsed_mcp({"pins", "accept", "fs", "write_file", "--state-dir", "/tmp/x"});
  EXPECT_EQ(a.pins_verb, "accept");
  EXPECT_EQ(a.server, "fs");
  EXPECT_EQ(a.tool, "write_file");
  EXPECT_EQ(a.state_dir, "/tmp/x");
  EXPECT_TRUE(parsed_mcp({"pins", "list", "--json"}).json);
}

TEST(McpGuardArgs, FinanceFlags) {
  McpGuardArgs a = parsed_mcp({"--max-order-value", "5000", "--approve-over", "$500", "--", "node", "s.js"});
  EXPECT_TRUE(a.inspect_actions);
  EXPECT_EQ(a.finance.max_order_value, 5000);
  EXPECT_EQ(a.finance.approve_over, 500);
  EXPECT_FALSE(a.finance.daily_limit);
  EXPECT_FALSE(a.finance.market_hours);
  a = parsed_mcp({"--finance-pack", "--max-order-value", "20000", "--", "node", "s.js"});
  EXPECT_EQ(a.finance.max_order_value, 20000);
  EXPECT_EQ(a.finance.approve_over, 1000);
  EXPECT_EQ(a.finance.daily_limit, 50000);
  EXPECT_EQ(a.finance.max_orders_per_hour, 20u);
  EXPECT_EQ(a.finance.outlier_factor, 5);
  EXPECT_TRUE(a.finance.deny_account_danger);
  EXPECT_TRUE(a.finance.market_hours);
  a = parsed_mcp({"--inspect-actions", "--", "node", "s.js"});
  EXPECT_TRUE(a.inspect_actions);
  EXPECT_FALSE(a.finance.caps_value());
  EXPECT_FALSE(parsed_mcp({"--", "node", "s.js"}).inspect_actions);
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--max-order-value", "-5"}, "--max-order-value '-5': an amount above 0"},
      {{"--max-order-value", "0"}, "--max-order-value '0': an amount above 0"},
      {{"--approve-over", "lots"}, "--approve-over 'lots': an amount above 0"},
      {{"--daily-limit", "1e9"}, "--daily-limit '1e9': an amount above 0"},
      {{"--max-orders-per-hour", "0"}, "--max-orders-per-hour '0': a whole number"},
      {{"--max-orders-per-hour", "2.5"}, "--max-orders-per-hour '2.5': a whole number"},
      {{"--outlier-factor", "1"}, "--outlier-factor '1': a number above 1"},
      {{"--outlier-factor", "x"}, "--outlier-factor 'x': a number above 1"},
      {{"--max-order-value", "100", "--approve-over", "100"}, "--approve-over 100: at or over --max-order-value 100"},
      {{"--finance-pack", "--approve-over", "20000"}, "--approve-over 20000: at or over --max-order-value 10000"},
  };
  for (auto [words, want] : bad) {
    words.insert(words.end(), {"--", "node", "s.js"});
    EXPECT_NE(mcp_error(words).find(want), std::string::npos) << mcp_error(words);
  }
}

TEST(McpGuardArgs, BadFlagsAreNamed) {
  EXPECT_EQ(mcp_error({"--enforce"}),
            "missing the server's command: faultctl mcp-guard [flags] -- COMMAND ARGS (or --upstream-url U)");
  EXPECT_EQ(mcp_error({"--deny-tool", "a b", "--", "x"}),
            "--deny-tool 'a b': a tool name has no spaces or control characters");
  EXPECT_EQ(mcp_error({"--server-name", "a/b", "--", "x"}),
            "--server-name 'a/b': letters, digits, '-', '_', '.' and '@', at most 64");
  EXPECT_EQ(mcp_error({"--policy", "p.yaml", "--enforce", "--", "x"}),
            "--enforce comes from the policy file with --policy; write it there");
  EXPECT_EQ(mcp_error({"--approve-timeout", "0s", "--", "x"}), "--approve-timeout must be at least 1ms");
  EXPECT_EQ(mcp_error({"pins"}), "pins: give list, accept SERVER [TOOL] or reset SERVER");
  EXPECT_EQ(mcp_error({"pins", "drop", "fs"}),
            "pins: unknown subcommand 'drop' (list, accept SERVER [TOOL], reset SERVER)");
  EXPECT_EQ(mcp_error({"pins", "reset"}), "pins reset: give the SERVER (as pins list names it)");
  EXPECT_EQ(mcp_error({"pins", "reset", "fs", "extra"}), "pins reset: unexpected 'extra'");
  EXPECT_EQ(mcp_error({"pins", "list", "--all"}), "pins list: unknown flag --all");
}

TEST(McpGuardArgs, ControlPlaneFlags) {
  McpGuardArgs a = parsed_mcp({"--control-plane", "http://127.0.0.1:8470", "--token", "fla_x", "--", "node", "s.js"});
  EXPECT_EQ(a.cp_url, "http://127.0.0.1:8470");
  EXPECT_EQ(a.cp_token, "fla_x");
  EXPECT_TRUE(parsed_mcp({"--", "node", "s.js"}).cp_url.empty());
  EXPECT_EQ(mcp_error({"--control-plane", "http://127.0.0.1:8470", "--", "node"}),
            "--control-plane needs --token (or FAULTLINE_CP_TOKEN): an agent token of the workspace");
  EXPECT_EQ(mcp_error({"--token", "fla_x", "--", "node"}), "--token goes with --control-plane");
  EXPECT_EQ(mcp_error({"--control-plane", "", "--token", "fla_x", "--", "node"}), "--control-plane: empty URL");
}

TEST(McpGuardArgs, BridgeFlags) {
  McpGuardArgs a =
      parsed_mcp({"--upstream-url", "https://user:pw@mcp.example.com:8443/mcp?k=v", "--upstream-transport", "sse",
                  "--upstream-header", "Authorization: Bearer ${SOME_TOKEN}", "--listen", "127.0.0.1:0"});
  EXPECT_TRUE(a.command.empty());
  EXPECT_TRUE(a.upstream_sse);
  // The header as given: its variable is read when the guard starts, not here.
  EXPECT_EQ(a.upstream_headers, (std::vector<std::string>{"Authorization: Bearer ${SOME_TOKEN}"}));
  EXPECT_EQ(a.server_name, "mcp.example.com_8443");  // no user, no password
  EXPECT_EQ(a.listen, "127.0.0.1:0");
  EXPECT_EQ(mcp_server_name_of_url("http://[::1]:3001/sse"), "__1_3001");
}

TEST(McpGuardArgs, BadBridgeFlagsAreNamed) {
  EXPECT_EQ(mcp_error({"--upstream-url", "ws://x"}), "--upstream-url 'ws://x': an http:// or https:// URL");
  EXPECT_EQ(mcp_error({"--upstream-url", "http://x/mcp", "--upstream-transport", "ws"}),
            "--upstream-transport 'ws': streamable or sse");
  EXPECT_EQ(mcp_error({"--upstream-url", "http://x/mcp", "--upstream-header", "no colon"}),
            "--upstream-header: 'Name: value' (a header name, a colon, its value)");
  EXPECT_EQ(mcp_error({"--upstream-url", "http://x/mcp", "--upstream-header", "X-A: ${A"}),
            "--upstream-header: '${' without its '}'");
  EXPECT_EQ(mcp_error({"--upstream-url", "http://x/mcp", "--upstream-header", "X-A: ${A-B}"}),
            "--upstream-header: '${A-B}' is not a variable name (letters, digits, '_')");
  EXPECT_EQ(mcp_error({"--upstream-url", "http://x/mcp", "--upstream-header", "Mcp-Session-Id: 1"}),
            "--upstream-header Mcp-Session-Id: the guard sets this header itself");
  EXPECT_EQ(mcp_error({"--upstream-header", "X-A: 1", "--", "s"}), "--upstream-header goes with --upstream-url");
  EXPECT_EQ(mcp_error({"--allow-remote", "--", "s"}), "--allow-remote goes with --listen");
  EXPECT_EQ(mcp_error({"--listen", "8931", "--", "s"}), "--listen '8931': HOST:PORT (127.0.0.1:8931; port 0 for any)");
  EXPECT_EQ(mcp_error({"--upstream-url", "http://x/mcp", "--", "s"}),
            "--upstream-url and a command (after --) both name the server: give one");
}

}  // namespace
}  // namespace faultline
