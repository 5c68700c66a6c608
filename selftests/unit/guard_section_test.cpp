// The guard's section of the policy file: spec.guard inside a Policy (YAML and
// JSON, with line:column), the bare JSON form, and each refusal naming its field.
#include "userspace/policy/guard_section.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "userspace/policy/policy.h"

namespace faultline {
namespace {

constexpr std::string_view kGuardPolicyYaml = R"(apiVersion: faultline.dev/v1
kind: Policy
metadata:
  name: agents
spec:
  guard:
    mode: enforce
    default_allow: false
    rules:
      - name: no-secrets
        action: deny
        path: /secrets/
        reason: secrets stay home
      - name: prod-writes
        action: approve
        method: post
        host: "*.prod.example.com:443"
      - name: models
        action: allow
        host: api.anthropic.com
        llm_model: claude-sonnet-*
        llm_max_tokens_over: 100
)";

std::vector<std::string> rendered(const std::vector<PolicyDiagnostic>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.render("F"));
  return out;
}

void expect_agents_policy(const GuardPolicy& g) {
  EXPECT_EQ(g.mode, GuardMode::Enforce);
  EXPECT_FALSE(g.default_allow);
  ASSERT_EQ(g.rules.size(), 3u);
  EXPECT_EQ(g.rules[0].name, "no-secrets");
  EXPECT_EQ(g.rules[0].action, GuardVerdict::Deny);
  EXPECT_EQ(g.rules[0].path, "/secrets/");
  EXPECT_EQ(g.rules[0].reason, "secrets stay home");
  EXPECT_EQ(g.rules[1].action, GuardVerdict::Approve);
  EXPECT_EQ(g.rules[1].method, "POST");
  ASSERT_TRUE(g.rules[1].host);
  EXPECT_EQ(g.rules[1].host->text(), "*.prod.example.com:443");
  EXPECT_EQ(g.rules[2].llm_model, "claude-sonnet-*");
  EXPECT_EQ(g.rules[2].llm_max_tokens_over, 100u);
}

TEST(GuardSection, PolicyFileYaml) {
  PolicyParse p = parse_policy(kGuardPolicyYaml);
  ASSERT_TRUE(p.ok()) << ::testing::PrintToString(rendered(p.errors));
  ASSERT_TRUE(p.policy.guard);
  expect_agents_policy(*p.policy.guard);
  EXPECT_FALSE(p.policy.egress);

  GuardSectionParse text = parse_guard_text(kGuardPolicyYaml);
  ASSERT_TRUE(text.ok()) << ::testing::PrintToString(rendered(text.errors));
  expect_agents_policy(text.policy);
}

TEST(GuardSection, PolicyFileJsonAndBareJson) {
  const nlohmann::json bare = {
      {"mode", "enforce"},
      {"default_allow", false},
      {"rules",
       {{{"name", "no-secrets"}, {"action", "deny"}, {"path", "/secrets/"}, {"reason", "secrets stay home"}},
        {{"name", "prod-writes"}, {"action", "approve"}, {"method", "post"}, {"host", "*.prod.example.com:443"}},
        {{"name", "models"},
         {"action", "allow"},
         {"host", "api.anthropic.com"},
         {"llm_model", "claude-sonnet-*"},
         {"llm_max_tokens_over", 100}}}}};
  auto g = parse_guard_section(bare);
  ASSERT_TRUE(g.ok()) << g.error().message;
  // nlohmann's json orders fields by name, not as written; the rules' order is kept.
  expect_agents_policy(*g);

  const nlohmann::json policy = {{"apiVersion", "faultline.dev/v1"},
                                 {"kind", "Policy"},
                                 {"metadata", {{"name", "agents"}}},
                                 {"spec", {{"guard", bare}}}};
  auto whole = parse_guard_section(policy);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  expect_agents_policy(*whole);

  // The same text through the policy file reader (strict JSON fast path).
  PolicyParse p = parse_policy(policy.dump(2));
  ASSERT_TRUE(p.ok()) << ::testing::PrintToString(rendered(p.errors));
  ASSERT_TRUE(p.policy.guard);
  expect_agents_policy(*p.policy.guard);

  GuardSectionParse text = parse_guard_text(bare.dump(2));
  ASSERT_TRUE(text.ok()) << ::testing::PrintToString(rendered(text.errors));
  expect_agents_policy(text.policy);
}

TEST(GuardSection, DefaultsAreMonitorAndAllow) {
  auto g = parse_guard_section(nlohmann::json::object());
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->mode, GuardMode::Monitor);
  EXPECT_TRUE(g->default_allow);
  EXPECT_TRUE(g->rules.empty());
}

// Each bad section: its errors, rendered "F:LINE:COLUMN: PATH: reason".
TEST(GuardSection, ErrorsNameTheFieldWithLineAndColumn) {
  struct Case {
    std::string_view name;
    std::string rules_yaml;  // below "    rules:\n"
    std::vector<std::string> want;
  };
  const std::string head =
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: p\nspec:\n  guard:\n    rules:\n";
  const std::vector<Case> cases = {
      {"bad action",
       "      - {name: a, action: allow, path: /a}\n      - {name: b, action: deny, path: /b}\n"
       "      - name: c\n        action: block\n        path: /c\n",
       {"F:11:17: spec.guard.rules[2].action: 'block': expected allow, deny or approve"}},
      {"unknown field",
       "      - name: a\n        action: deny\n        hots: x.example.com\n",
       {"F:8:9: spec.guard.rules[0]: no matcher: give host, path, method, llm_model, llm_max_tokens_over or "
        "dlp_type, for MCP mcp_tool or mcp_args, for SQL sql_verb, sql_table or sql_function, for Kubernetes k8s_verb, "
        "k8s_resource, k8s_namespace or k8s_name (default_allow decides "
        "the rest)",
        "F:10:9: spec.guard.rules[0].hots: unknown field 'hots' (did you mean 'host'?)"}},
      {"empty name",
       "      - {name: '', action: deny, path: /a}\n",
       {"F:8:16: spec.guard.rules[0].name: '': letters, digits, '-', '_' and '.', starting with a letter or digit, "
        "at most 63"}},
      {"duplicate names",
       "      - {name: a, action: deny, path: /a}\n      - {name: a, action: allow, path: /b}\n",
       {"F:9:9: spec.guard.rules[1].name: 'a' is also the name of rules[0]"}},
      {"wrong type",
       "      - {name: a, action: deny, path: [x]}\n",
       {"F:8:39: spec.guard.rules[0].path: expected text, found a list"}},
      {"bad tokens",
       "      - {name: a, action: deny, llm_max_tokens_over: '12'}\n",
       {"F:8:54: spec.guard.rules[0].llm_max_tokens_over: expected a whole number of tokens, found '12'"}},
      {"bad host",
       "      - {name: a, action: deny, host: 'a.*.com'}\n",
       {"F:8:39: spec.guard.rules[0].host: 'a.*.com': a wildcard is only '*.' at the start (*.example.com)"}},
      {"bad method",
       "      - {name: a, action: deny, method: G3T}\n",
       {"F:8:41: spec.guard.rules[0].method: 'G3T': a method is a word of letters (GET, POST, DELETE)"}},
      {"missing action", "      - {name: a, path: /x}\n", {"F:8:9: spec.guard.rules[0].action: missing (required)"}},
      {"mcp rule with a host",
       "      - {name: a, action: deny, mcp_tool: write_*, host: x.example.com}\n",
       {"F:8:52: spec.guard.rules[0].host: an MCP rule (mcp_tool, mcp_args) judges tools/call, which has no host: "
        "write it as a rule of its own"}},
      {"mcp bad pointer",
       "      - name: a\n        action: deny\n        mcp_args:\n          - {arg: path, prefix: /etc/}\n",
       {"F:11:19: spec.guard.rules[0].mcp_args[0].arg: 'path': a JSON pointer starts with '/' (/path, "
        "/options/mode)"}},
      {"mcp two tests",
       "      - name: a\n        action: deny\n        mcp_args:\n          - {arg: /n, over: 3, equals: '4'}\n",
       {"F:11:13: spec.guard.rules[0].mcp_args[0]: give one test, found 2 (equals, over): write one matcher per "
        "test"}},
      {"mcp bad regex",
       "      - name: a\n        action: deny\n        mcp_args:\n          - {arg: /q, regex: 'a(b'}\n",
       {"F:11:30: spec.guard.rules[0].mcp_args[0].regex: 'a(b': not a regex (Mismatched '(' and ')' in regular "
        "expression)"}},
      {"mcp over not a number",
       "      - name: a\n        action: deny\n        mcp_args:\n          - {arg: /n, over: lots}\n",
       {"F:11:29: spec.guard.rules[0].mcp_args[0].over: 'lots': expected a number (10, 2.5, -1)"}},
      {"sql rule with a host",
       "      - {name: a, action: deny, sql_verb: DROP, host: x.example.com}\n",
       {"F:8:49: spec.guard.rules[0].host: a SQL rule (sql_verb, sql_table, sql_function) judges statements over "
        "the Postgres wire, which have no host: write it as a rule of its own"}},
      {"sql bad verb and glob",
       "      - {name: a, action: deny, sql_verb: 'DROP TABLE', sql_table: 'a b'}\n",
       {"F:8:43: spec.guard.rules[0].sql_verb: 'DROP TABLE': a SQL verb is a word of letters (SELECT, DROP, DELETE)",
        "F:8:68: spec.guard.rules[0].sql_table: 'a b': a table or function glob has no spaces or control "
        "characters"}},
      {"k8s bad verb and glob",
       "      - {name: a, action: deny, k8s_verb: remove, k8s_namespace: 'a b'}\n",
       {"F:8:43: spec.guard.rules[0].k8s_verb: 'remove': a Kubernetes verb is get, list, watch, create, update, "
        "patch, delete, deletecollection, proxy or *",
        "F:8:66: spec.guard.rules[0].k8s_namespace: 'a b': a namespace glob has no spaces or control characters"}},
      {"k8s with sql",
       "      - {name: a, action: deny, k8s_verb: delete, sql_verb: DROP}\n",
       {"F:8:51: spec.guard.rules[0]: a Kubernetes rule (k8s_verb, k8s_resource, k8s_namespace, k8s_name) judges "
        "HTTP requests to an API server, not SQL statements or MCP calls: write it as a rule of its own"}},
      {"not a list", "      x: 1\n", {"F:8:7: spec.guard.rules: expected a list, found a mapping"}},
  };
  for (const Case& c : cases) {
    PolicyParse p = parse_policy(head + c.rules_yaml);
    EXPECT_EQ(rendered(p.errors), c.want) << c.name;
  }
}

TEST(GuardSection, SqlRules) {
  PolicyParse p = parse_policy(
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: p\nspec:\n  guard:\n    rules:\n"
      "      - {name: no-drop, action: deny, sql_verb: drop}\n"
      "      - {name: prod, action: approve, sql_verb: DELETE, sql_table: 'Prod.*'}\n"
      "      - {name: sleep, action: deny, sql_function: pg_sleep}\n");
  ASSERT_TRUE(p.ok()) << rendered(p.errors).front();
  ASSERT_TRUE(p.policy.guard);
  const auto& r = p.policy.guard->rules;
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].sql_verb, "DROP");
  EXPECT_TRUE(r[0].is_sql());
  EXPECT_EQ(r[1].action, GuardVerdict::Approve);
  EXPECT_EQ(r[1].sql_table, "prod.*");
  EXPECT_EQ(r[2].sql_function, "pg_sleep");
}

TEST(GuardSection, KubernetesRulesWithHttpMatchers) {
  PolicyParse p = parse_policy(
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: p\nspec:\n  guard:\n    rules:\n"
      "      - {name: no-prod-secrets, action: deny, k8s_resource: Secrets, k8s_namespace: prod}\n"
      "      - {name: exec, action: approve, k8s_verb: CREATE, k8s_resource: 'pods/*'}\n"
      "      - {name: reads, action: allow, host: api.example.com:6443, k8s_verb: get, k8s_name: 'app-*'}\n");
  ASSERT_TRUE(p.ok()) << rendered(p.errors).front();
  ASSERT_TRUE(p.policy.guard);
  const auto& r = p.policy.guard->rules;
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].k8s_resource, "secrets");
  EXPECT_EQ(r[0].k8s_namespace, "prod");
  EXPECT_TRUE(r[0].is_k8s());
  EXPECT_EQ(r[1].k8s_verb, "create");
  EXPECT_EQ(r[1].k8s_resource, "pods/*");
  ASSERT_TRUE(r[2].host.has_value());
  EXPECT_EQ(r[2].k8s_name, "app-*");
}

TEST(GuardSection, ModeAndDefaultErrors) {
  PolicyParse p = parse_policy(
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: p\nspec:\n  guard:\n    mode: block\n"
      "    default_allow: 'yes'\n    extra: 1\n");
  EXPECT_EQ(rendered(p.errors),
            (std::vector<std::string>{"F:7:11: spec.guard.mode: 'block': expected monitor or enforce",
                                      "F:8:20: spec.guard.default_allow: expected true or false, found 'yes'",
                                      "F:9:5: spec.guard.extra: unknown field 'extra'"}));
}

TEST(GuardSection, BareJsonErrorsAreOneLineEach) {
  const nlohmann::json bare = {{"mode", "enforce"},
                               {"rules",
                                {{{"name", "a"}, {"action", "deny"}, {"path", "/a"}},
                                 {{"name", "b"}, {"action", "deny"}, {"path", "/b"}},
                                 {{"name", "c"}, {"action", "block"}, {"path", "/c"}},
                                 {{"name", "a"}, {"action", "allow"}, {"host", {1, 2}}, {"color", "red"}}}}};
  auto g = parse_guard_section(bare);
  ASSERT_FALSE(g.ok());
  EXPECT_TRUE(g.error().bad_input);
  EXPECT_EQ(g.error().message,
            "rules[2].action: 'block': expected allow, deny or approve\n"
            "rules[3].color: unknown field 'color'\n"
            "rules[3].host: expected text, found a list\n"
            "rules[3].name: 'a' is also the name of rules[0]");
}

TEST(GuardSection, WholePolicyWithoutGuardIsRefusedAsASection) {
  auto g = parse_guard_section(nlohmann::json{{"apiVersion", "faultline.dev/v1"},
                                              {"kind", "Policy"},
                                              {"metadata", {{"name", "p"}}},
                                              {"spec", {{"faults", nlohmann::json::array()}}}});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message, "spec.guard: missing: this policy has no guard section");
  EXPECT_FALSE(parse_guard_section(nlohmann::json::array()).ok());
  GuardSectionParse t = parse_guard_text("mode: [");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.errors.front().path, "<document>");
}

}  // namespace
}  // namespace faultline
