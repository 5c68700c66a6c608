// The policy compiler writes exactly what the guard writes for the same rules,
// the precedence rule decides as documented, and the YAML and JSON examples
// are one policy.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bpf/lib/dns_parse.h"
#include "ctl/policy_faults.h"
#include "userspace/policy/policy_compiler.h"

namespace faultline {
namespace {

std::string read_example(const std::string& name) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/docs/examples/policy/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fl_addr v4_addr(const char* text) {
  fl_addr a{};
  a.b[10] = a.b[11] = 0xff;
  inet_pton(AF_INET, text, a.b + 12);
  return a;
}

Policy parsed_ok(const std::string& text) {
  PolicyParse p = parse_policy(text, run_fault_checker());
  std::string errors;
  for (const auto& e : p.errors) errors += e.render("policy") + "\n";
  EXPECT_TRUE(p.ok()) << errors;
  return p.policy;
}

constexpr const char* kTwoScopes = R"(apiVersion: faultline.dev/v1
kind: Policy
metadata: {name: two}
spec:
  egress:
    - all: true
      mode: enforce
      default_allow: true
      rules:
        - {name: no-metadata, action: deny, cidr: 169.254.169.254}
    - cgroup: /app
      mode: enforce
      default_allow: false
      deny_errno: ECONNREFUSED
      exfil_cap: 1MiB
      rules:
        - {name: internal, action: allow, cidr: 10.0.0.0/8, ports: [80, 8000-8100], proto: tcp}
        - {name: db-admin, action: deny, cidr: 10.0.5.0/24, ports: [22]}
        - {name: ssh-bastion, action: allow, cidr: 10.0.5.7, ports: [22]}
        - {name: api, action: allow, host: api.example.com}
)";

TEST(PolicyExamples, YamlAndJsonAreValidAndCompileToTheSameImages) {
  Policy y = parsed_ok(read_example("web-egress.yaml"));
  Policy j = parsed_ok(read_example("web-egress.json"));
  auto cy = compile_policy(y);
  auto cj = compile_policy(j);
  ASSERT_TRUE(cy.ok() && cj.ok());
  EXPECT_EQ(compiled_json(*cy), compiled_json(*cj));
  EXPECT_EQ(compiled_text(*cy), compiled_text(*cj));
  ASSERT_TRUE(y.egress && y.faults);
  EXPECT_EQ(y.egress->size(), 2u);
  EXPECT_EQ(y.faults->size(), 2u);
}

TEST(PolicyExamples, EveryExampleFileIsValid) {
  for (const char* f : {"web-egress.yaml", "web-egress.json", "host-egress.yaml", "guard-egress.yaml"}) {
    SCOPED_TRACE(f);
    const std::string text = read_example(f);
    ASSERT_FALSE(text.empty()) << "missing docs/examples/policy/" << f;
    (void)parsed_ok(text);
  }
}

TEST(PolicyCompile, ImagesAreTheGuardsForTheSameRules) {
  Policy p = parsed_ok(kTwoScopes);
  auto c = compile_policy(p);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->scopes.size(), 2u);
  const CompiledScope& app = c->scopes[1];
  // The same rules as guard flags, in the order the policy expands them.
  std::vector<EgressRule> flags;
  for (const char* r : {"10.0.0.0/8:80/tcp", "10.0.0.0/8:8000-8100/tcp", "10.0.5.0/24:22", "10.0.5.7:22"}) {
    auto rule = parse_rule(std::string(r).starts_with("10.0.5.0") ? Verdict::Deny : Verdict::Allow, r);
    ASSERT_TRUE(rule.ok()) << rule.error().message;
    flags.push_back(*rule);
  }
  ASSERT_EQ(app.rules.size(), flags.size());
  for (auto v : {Verdict::Deny, Verdict::Allow}) {
    auto guard = compile_rules(flags, v);
    ASSERT_TRUE(guard.ok());
    const CompiledTrie& mine = v == Verdict::Deny ? app.deny : app.allow;
    ASSERT_EQ(mine.entries.size(), guard->entries.size());
    for (size_t i = 0; i < mine.entries.size(); ++i) {
      EXPECT_EQ(std::memcmp(&mine.entries[i].first, &guard->entries[i].first, sizeof(fl_sa_key)), 0) << i;
      EXPECT_EQ(std::memcmp(&mine.entries[i].second, &guard->entries[i].second, sizeof(fl_sa_bucket)), 0) << i;
    }
  }
  // Allow trie: 10/8 (two slots, one per ports entry) and 10.0.5.7/32 (its own
  // rule first, then 10/8's two).
  ASSERT_EQ(app.allow.entries.size(), 2u);
  const fl_sa_bucket& host = app.allow.entries[1].second;
  EXPECT_EQ(app.allow.entries[1].first.prefixlen, 128u);
  ASSERT_EQ(host.n, 3);
  EXPECT_EQ(host.r[0].id, 3);
  EXPECT_EQ(host.r[0].port_lo, 22);
  EXPECT_EQ(app.rules[host.r[0].id].policy_rule, 2u);  // ssh-bastion
  EXPECT_EQ(app.policy.flags, FL_SA_POLICY | FL_SA_ENFORCE | FL_SA_HAS_DENY | FL_SA_HAS_ALLOW | FL_SA_HAS_HOSTS);
  EXPECT_EQ(app.policy.deny_errno, static_cast<uint32_t>(ECONNREFUSED));
  EXPECT_EQ(app.policy.exfil_cap, 1048576u);
  EXPECT_EQ(app.policy.expires_ns, FL_SA_NO_EXPIRY);
  EXPECT_EQ(app.policy.armed, 1u);
  // The host rule: a watched name, exact, its allow bucket holding the rule
  // with the id after the 4 address rules, the scope's default TTL clamp.
  EXPECT_TRUE(app.not_compiled.empty());
  ASSERT_EQ(app.host_rules.size(), 1u);
  EXPECT_EQ(app.host_rules[0].id, 4u);
  EXPECT_EQ(app.host_rules[0].policy_rule, 3u);
  EXPECT_EQ(app.rule_count(), 5u);
  ASSERT_EQ(app.watched.size(), 1u);
  const WatchedName& w = app.watched[0];
  EXPECT_EQ(w.name, "api.example.com");
  EXPECT_EQ(w.key.wild, 0);
  EXPECT_EQ(w.key.hash, fl_dns_hash_text("api.example.com", 15));
  EXPECT_EQ(w.value.deny.n, 0);
  ASSERT_EQ(w.value.allow.n, 1);
  EXPECT_EQ(w.value.allow.r[0].id, 4);
  EXPECT_EQ(w.value.ttl_min, 30u);
  EXPECT_EQ(w.value.ttl_max, 3600u);
  // all + /app nest: the scope-chain limit is named.
  ASSERT_FALSE(c->notes.empty());
  EXPECT_NE(c->notes[0].find("most specific scope"), std::string::npos) << c->notes[0];
}

TEST(PolicyCompile, WildcardAndExactHostRulesShareNothingButTheirSuffix) {
  Policy p = parsed_ok(R"(apiVersion: faultline.dev/v1
kind: Policy
metadata: {name: hosts}
spec:
  egress:
    - all: true
      dns_ttl_min: 1m
      dns_ttl_max: 2h
      rules:
        - {name: any-svc, action: allow, host: "*.svc.example.com", ports: [443, 8443]}
        - {name: svc, action: deny, host: svc.example.com, proto: udp}
        - {name: no-admin, action: deny, host: "*.svc.example.com", ports: [22]}
)");
  auto c = compile_policy(p);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const CompiledScope& s = c->scopes[0];
  ASSERT_EQ(s.watched.size(), 2u);
  EXPECT_EQ(s.watched[0].key.hash, s.watched[1].key.hash) << "the same name, exact and as a suffix";
  EXPECT_EQ(s.watched[0].key.wild, 1);
  EXPECT_EQ(s.watched[1].key.wild, 0);
  EXPECT_EQ(s.watched[0].value.allow.n, 2);  // one slot per ports entry
  EXPECT_EQ(s.watched[0].value.deny.n, 1);
  EXPECT_EQ(s.watched[0].value.deny.r[0].port_lo, 22);
  EXPECT_EQ(s.watched[1].value.deny.r[0].proto, IPPROTO_UDP);
  EXPECT_EQ(s.watched[0].value.ttl_min, 60u);
  EXPECT_EQ(s.watched[0].value.ttl_max, 7200u);
  EXPECT_EQ(s.rule_count(), 4u);
  EXPECT_NE(compiled_text(*c).find("host rules: 4 on 2 watched names (*.svc.example.com, svc.example.com)"),
            std::string::npos)
      << compiled_text(*c);
}

TEST(PolicyCompile, JsonListsEveryEntryWithItsBytes) {
  Policy p = parsed_ok(kTwoScopes);
  auto c = compile_policy(p);
  ASSERT_TRUE(c.ok());
  auto j = nlohmann::json::parse(compiled_json(*c));
  ASSERT_EQ(j["scopes"].size(), 2u);
  const auto& maps = j["scopes"][1]["maps"];
  ASSERT_EQ(maps.size(), 5u);
  EXPECT_EQ(maps[0]["name"], "fl_sa_policy");
  EXPECT_EQ(maps[0]["items"][0]["value_hex"].get<std::string>().size(), 2 * sizeof(fl_sa_policy));
  EXPECT_EQ(maps[1]["name"], "fl_sa_deny");
  EXPECT_EQ(maps[1]["entries"], 1);
  EXPECT_EQ(maps[1]["bytes"], sizeof(fl_sa_key) + sizeof(fl_sa_bucket));
  EXPECT_EQ(maps[1]["items"][0]["key"]["prefix"], "10.0.5.0/24");
  EXPECT_EQ(maps[1]["items"][0]["value"]["rules"][0]["rule"], "db-admin");
  EXPECT_EQ(maps[2]["name"], "fl_sa_allow");
  EXPECT_EQ(maps[2]["entries"], 2);
  EXPECT_EQ(maps[3]["name"], "fl_sa_rule_hits");
  EXPECT_EQ(maps[3]["entries"], 5);  // 4 address rules and the host rule
  EXPECT_EQ(maps[4]["name"], "fl_dns_watch");
  EXPECT_EQ(maps[4]["entries"], 1);
  EXPECT_EQ(maps[4]["items"][0]["key"]["name"], "api.example.com");
  EXPECT_EQ(maps[4]["items"][0]["value"]["allow"]["rules"][0]["rule"], "api");
  EXPECT_EQ(maps[4]["items"][0]["value_hex"].get<std::string>().size(), 2 * sizeof(fl_dns_watch));
  EXPECT_EQ(j["scopes"][1]["rule_ids"][1]["ports"], "8000-8100");
}

TEST(PolicyPrecedence, DenyOverAllowOverDefaultInTheMostSpecificScope) {
  Policy p = parsed_ok(kTwoScopes);
  const auto& s = *p.egress;
  // /app: 10.0.5.9:22 is denied by db-admin although internal... covers only 80 and 8000-8100.
  auto d = decide(s, "/app", v4_addr("10.0.5.9"), 22, IPPROTO_TCP);
  ASSERT_NE(d.scope, nullptr);
  EXPECT_EQ(d.scope->cgroup, "/app");
  EXPECT_FALSE(d.allowed);
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.rule->name, "db-admin");
  // The bastion's allow loses to the covering deny: deny > allow, whatever the prefix length.
  d = decide(s, "/app/worker", v4_addr("10.0.5.7"), 22, IPPROTO_TCP);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule->name, "db-admin");
  // Allowed by a rule; denied by the default.
  d = decide(s, "/app", v4_addr("10.1.2.3"), 8080, IPPROTO_TCP);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule->name, "internal");
  d = decide(s, "/app", v4_addr("10.1.2.3"), 8080, IPPROTO_UDP);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, nullptr);
  EXPECT_TRUE(d.enforced);
  // /app decides for /app, not all: the host-wide deny of the metadata address is not consulted.
  d = decide(s, "/app", v4_addr("169.254.169.254"), 80, IPPROTO_TCP);
  EXPECT_EQ(d.scope->cgroup, "/app");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule, nullptr);  // /app's default deny, not all's rule
  // Elsewhere the host-wide scope decides; "/application" is not below "/app".
  d = decide(s, "/application", v4_addr("169.254.169.254"), 80, IPPROTO_TCP);
  ASSERT_NE(d.scope, nullptr);
  EXPECT_TRUE(d.scope->host_wide);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.rule->name, "no-metadata");
  d = decide(s, "/", v4_addr("192.0.2.1"), 443, IPPROTO_TCP);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.rule, nullptr);
}

TEST(PolicyPrecedence, NoScopeNoJudgement) {
  Policy p = parsed_ok(R"(apiVersion: faultline.dev/v1
kind: Policy
metadata: {name: one}
spec:
  egress:
    - cgroup: /app
      default_allow: false
)");
  auto d = decide(*p.egress, "/other", v4_addr("192.0.2.1"), 443, IPPROTO_TCP);
  EXPECT_EQ(d.scope, nullptr);
  EXPECT_TRUE(d.allowed);
  d = decide(*p.egress, "/app", v4_addr("192.0.2.1"), 443, IPPROTO_TCP);
  EXPECT_FALSE(d.allowed);
  EXPECT_FALSE(d.enforced);  // monitor unless the scope says enforce
}

TEST(PolicyFaults, AnExperimentIsTheRunCommandLine) {
  Policy p = parsed_ok(read_example("web-egress.yaml"));
  ASSERT_TRUE(p.faults);
  EXPECT_EQ(run_words((*p.faults)[0]),
            (std::vector<std::string>{"loss", "--target", "10.0.5.10", "--percent", "5", "--duration", "2m"}));
  EXPECT_EQ(run_words((*p.faults)[1]),
            (std::vector<std::string>{"--syscall", "connect", "--errno", "ECONNREFUSED", "--percent", "10",
                                      "--duration", "30s", "--cgroup", "/sys/fs/cgroup/system.slice/batch.service"}));
}

TEST(PolicyNames, DidYouMean) {
  EXPECT_EQ(closest_name("defualt_allow", {"mode", "default_allow", "rules"}), "default_allow");
  EXPECT_EQ(closest_name("Rules", {"mode", "default_allow", "rules"}), "rules");
  EXPECT_EQ(closest_name("zzz", {"mode", "default_allow", "rules"}), "");
}

}  // namespace
}  // namespace faultline
