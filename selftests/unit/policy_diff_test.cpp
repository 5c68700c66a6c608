// The canonical writer reads back as the same policy (JSON and YAML), the
// rule-level diff names what changed, and recorded guard decisions replay
// through a new policy with what flips counted per destination.
#include "userspace/policy/policy_diff.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

#include "userspace/policy/policy_writer.h"

namespace faultline {
namespace {

constexpr const char* kWriterPolicy = R"(apiVersion: faultline.dev/v1
kind: Policy
metadata: {name: "round-trip"}
spec:
  egress:
    - cgroup: /system.slice/web.service
      mode: enforce
      default_allow: false
      deny_errno: ECONNREFUSED
      exfil_cap: 10MB
      rules:
        - {name: db, action: allow, cidr: 10.0.5.0/24, ports: [5432, 8000-8100], proto: tcp, reason: "the \"primary\" db"}
        - {name: v6, action: deny, cidr: "fd00::/64"}
    - all: true
      rules: []
)";

Policy parse_or_fail(const std::string& text) {
  PolicyParse p = parse_policy(text);
  for (const auto& e : p.errors) ADD_FAILURE() << e.render("<text>") << "\n" << text;
  return p.policy;
}

TEST(PolicyWriter, JsonAndYamlReadBackAsTheSamePolicy) {
  const Policy p = parse_or_fail(kWriterPolicy);
  const std::string json = policy_json_text(p), yaml = policy_yaml_text(p);
  EXPECT_EQ(policy_json_text(parse_or_fail(json)), json);
  EXPECT_EQ(policy_json_text(parse_or_fail(yaml)), json) << yaml;
  EXPECT_EQ(policy_yaml_text(parse_or_fail(yaml)), yaml);
  auto stored = policy_from_canonical_json(json);  // how apply reads its stored text back
  ASSERT_TRUE(stored) << stored.error().message;
  EXPECT_EQ(policy_json_text(*stored), json);
  EXPECT_EQ(policy_yaml_text(*stored), yaml);
  EXPECT_FALSE(policy_from_canonical_json("{\"spec\": {\"egress\": [{}]}, \"metadata\": {\"name\": \"x\"}}"));
  EXPECT_NE(yaml.find("          ports: [5432, 8000-8100]\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("    - all: true\n      mode: \"monitor\"\n"), std::string::npos) << yaml;
  EXPECT_NE(json.find("\"exfil_cap\": 10000000"), std::string::npos) << json;
}

TEST(PolicyWriter, DirectJsonIsTheDocumentsBytes) {
  const Policy p = parse_or_fail(kWriterPolicy);
  EXPECT_EQ(policy_json_text(p), policy_json_text_by_document(p));
  Policy none = p;
  none.egress = std::vector<EgressScope>{};
  EXPECT_EQ(policy_json_text(none), policy_json_text_by_document(none));
  Policy odd = p;
  (*odd.egress)[0].rules[0].reason = "tab\there, \x01 control, \"quoted\", back\\slash, caf\xc3\xa9";
  (*odd.egress)[0].rules[1].ports = {PortRange{53, 53}};
  (*odd.egress)[1].rules = (*odd.egress)[0].rules;
  EXPECT_EQ(policy_json_text(odd), policy_json_text_by_document(odd));
  Policy ttl = p;  // host rules' TTL clamp, written only when not the default
  (*ttl.egress)[0].dns_ttl_min = 5;
  (*ttl.egress)[1].dns_ttl_max = 600;
  EXPECT_EQ(policy_json_text(ttl), policy_json_text_by_document(ttl));
  EXPECT_NE(policy_json_text(ttl).find("\"dns_ttl_min\": \"5s\""), std::string::npos) << policy_json_text(ttl);
}

// A JSON file is read by the fast path (nlohmann) into the same model the
// YAML reader makes of it; with an error, the diagnostics are yaml-cpp's,
// with their line and column.
TEST(PolicyParseJson, FastPathReadsTheSamePolicyAsYaml) {
  const Policy p = parse_or_fail(kWriterPolicy);
  const std::string json = policy_json_text(p);
  EXPECT_EQ(policy_json_text(parse_or_fail(json)), json);
  EXPECT_EQ(policy_yaml_text(parse_or_fail(json)), policy_yaml_text(p));
  // A repeated field: nlohmann would keep the last; the YAML reader reports it.
  std::string repeated = json;
  repeated.replace(repeated.find("\"mode\": \"enforce\""), 17, "\"mode\": \"enforce\", \"mode\": \"monitor\"");
  PolicyParse r = parse_policy(repeated);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors[0].render("F").find("repeated field"), std::string::npos) << r.errors[0].render("F");
  // An error found by the reader comes with yaml-cpp's line and column.
  std::string bad = json;
  bad.replace(bad.find("\"10.0.5.0/24\""), 13, "\"10.0.5.0/33\"");
  PolicyParse b = parse_policy(bad);
  ASSERT_EQ(b.errors.size(), 1u);
  EXPECT_GT(b.errors[0].mark.line, 1) << b.errors[0].render("F");
  EXPECT_NE(b.errors[0].path.find("cidr"), std::string::npos) << b.errors[0].render("F");
  // Numbers and booleans keep their YAML meaning: a quoted "true" is text.
  std::string quoted = json;
  quoted.replace(quoted.find("\"default_allow\": false"), 23, "\"default_allow\": \"false\"");
  EXPECT_FALSE(parse_policy(quoted).errors.empty());
}

TEST(PolicyDiff, NamesAddedRemovedAndChangedRulesAndScopes) {
  const Policy live = parse_or_fail(kWriterPolicy);
  const std::string next_text = R"(apiVersion: faultline.dev/v1
kind: Policy
metadata: {name: "round-trip"}
spec:
  egress:
    - cgroup: /system.slice/web.service
      mode: enforce
      default_allow: false
      deny_errno: ECONNREFUSED
      exfil_cap: 10MB
      rules:
        - {name: db, action: allow, cidr: 10.0.5.0/24, ports: [5432], proto: tcp, reason: "the \"primary\" db"}
        - {name: smtp, action: deny, cidr: 0.0.0.0/0, ports: [25]}
    - cgroup: /batch
      rules: []
)";
  const Policy next = parse_or_fail(next_text);
  EXPECT_EQ(diff_text(diff_egress(*live.egress, *next.egress)),
            "~ cgroup /system.slice/web.service rule db: was allow 10.0.5.0/24 ports 5432,8000-8100 tcp (reason: the "
            "\"primary\" db); now allow 10.0.5.0/24 ports 5432 tcp (reason: the \"primary\" db)\n"
            "+ cgroup /system.slice/web.service rule smtp: deny 0.0.0.0/0 ports 25\n"
            "- cgroup /system.slice/web.service rule v6: deny fd00::/64\n"
            "+ scope cgroup /batch: monitor, default allow, deny errno EPERM, 0 rules\n"
            "- scope all: monitor, default allow, deny errno EPERM, 0 rules\n");
  EXPECT_TRUE(diff_egress(*live.egress, *live.egress).empty());
}

TEST(PolicyDiff, SimulateCountsWhatFlipsPerDestination) {
  const std::string log =
      R"({"op":"connect","destination":"10.0.5.9:5432","proto":"tcp","verdict":"allow","rule":"x","pid":1,"comm":"a"})"
      "\n"
      R"({"op":"connect","destination":"10.0.5.9:5432","proto":"tcp","verdict":"allow","rule":"x","pid":1,"comm":"a"})"
      "\n"
      R"({"op":"connect","destination":"192.0.2.1:443","proto":"tcp","verdict":"would-deny","rule":"d","pid":1,"comm":"a"})"
      "\n"
      R"({"op":"sendmsg","destination":"[fd00::1]:53","proto":"udp","verdict":"allow","rule":"d","pid":1,"comm":"a"})"
      "\n"
      R"({"op":"egress","destination":"10.0.5.9:5432","proto":"tcp","verdict":"exfil-cap","rule":"d","pid":1,"comm":"a","bytes":5})"
      "\n\n";
  auto decisions = read_decision_log(log);
  ASSERT_TRUE(decisions) << decisions.error().message;
  ASSERT_EQ(decisions->size(), 4u);
  const Policy p = parse_or_fail(R"(apiVersion: faultline.dev/v1
kind: Policy
metadata: {name: sim}
spec:
  egress:
    - all: true
      mode: enforce
      default_allow: true
      rules:
        - {name: no-db, action: deny, cidr: 10.0.5.0/24, ports: [5432]}
        - {name: no-v6, action: deny, cidr: "fd00::/64", proto: udp}
)");
  const Simulation s = simulate_decisions(*decisions, *p.egress, "/");
  EXPECT_EQ(simulation_text(s),
            "replayed 4 recorded decisions: 0 unchanged\n"
            "  would now be denied (were allowed): 3\n"
            "    10.0.5.9:5432/tcp  x2  (rule no-db)\n"
            "    [fd00::1]:53/udp  x1  (rule no-v6)\n"
            "  would now be allowed (were denied): 1\n"
            "    192.0.2.1:443/tcp  x1  (default allow)\n");
  auto bad = read_decision_log("{\"op\":\"connect\"}\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "line 1: not a guard decision (op, destination and verdict are needed)");
  auto dest = read_decision_log(R"({"op":"connect","destination":"db:5432","verdict":"allow"})");
  ASSERT_FALSE(dest);
  EXPECT_EQ(dest.error().message, "line 1: destination 'db:5432' is not ADDRESS:PORT");
  EXPECT_FALSE(read_decision_log("not json\n"));
}

}  // namespace
}  // namespace faultline
