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

TEST(McpGuardArgs, BadFlagsAreNamed) {
  EXPECT_EQ(mcp_error({"--enforce"}), "missing the server's command: faultctl mcp-guard [flags] -- COMMAND ARGS");
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

}  // namespace
}  // namespace faultline
