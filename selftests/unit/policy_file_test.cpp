// The policy file: a table of malformed policies, each with the exact errors
// `faultctl policy validate` prints (line, column, field path, reason). The
// examples of docs/examples/policy are read in policy_compile_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ctl/policy_faults.h"
#include "userspace/policy/policy.h"

namespace faultline {
namespace {

struct MalformedPolicy {
  const char* name;
  const char* text;
  std::vector<std::string> want;  // rendered with the file name "F"
  friend void PrintTo(const MalformedPolicy& m, std::ostream* os) { *os << m.name; }
};

// Lines 1-5 of most cases: the header every policy starts with.
#define FL_HEAD "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: t\nspec:\n"

const MalformedPolicy kMalformed[] = {
    {"syntax_unclosed_flow",
     "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: t\nspec: {}\n",
     {"F:4:5: <document>: not YAML or JSON: end of map flow not found"}},
    {"empty_file", "", {"F:1:1: <document>: empty: expected a Policy (apiVersion, kind, metadata, spec)"}},
    {"two_documents",
     FL_HEAD
     "  egress: []\n---\napiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: t\nspec:\n  egress: []\n",
     {"F:8:1: <document>: one policy per file (found 2 documents)"}},
    {"top_level_list", "- apiVersion: faultline.dev/v1\n", {"F:1:1: <document>: expected a mapping, found a list"}},
    {"api_version_wrong",
     "apiVersion: faultline.dev/v2\nkind: Policy\nmetadata:\n  name: t\nspec:\n  egress: []\n",
     {"F:1:13: apiVersion: 'faultline.dev/v2': expected faultline.dev/v1"}},
    {"api_version_missing",
     "kind: Policy\nmetadata:\n  name: t\nspec:\n  egress: []\n",
     {"F:1:1: apiVersion: missing (required)"}},
    {"kind_wrong",
     "apiVersion: faultline.dev/v1\nkind: NetworkChaos\nmetadata:\n  name: t\nspec:\n  egress: []\n",
     {"F:2:7: kind: 'NetworkChaos': expected Policy"}},
    {"unknown_top_field", FL_HEAD "  egress: []\nstatus: {}\n", {"F:7:1: status: unknown field 'status'"}},
    {"metadata_missing",
     "apiVersion: faultline.dev/v1\nkind: Policy\nspec:\n  egress: []\n",
     {"F:1:1: metadata: missing (required): metadata: {name: NAME}"}},
    {"metadata_name_bad",
     "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: bad name!\nspec:\n  egress: []\n",
     {"F:4:9: metadata.name: 'bad name!': letters, digits, '-', '_' and '.', starting with a letter or digit, at most "
      "253"}},
    {"metadata_unknown_field",
     "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: t\n  labels: {}\nspec:\n  egress: []\n",
     {"F:5:3: metadata.labels: unknown field 'labels'"}},
    {"metadata_name_list",
     "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: [a, b]\nspec:\n  egress: []\n",
     {"F:4:9: metadata.name: expected text, found a list"}},
    {"spec_missing",
     "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: t\n",
     {"F:1:1: spec: missing (required): spec with egress, faults or both"}},
    {"spec_empty",
     "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: t\nspec: {}\n",
     {"F:5:7: spec: names none of egress, faults and guard: the policy would change nothing"}},
    {"spec_unknown_field",
     FL_HEAD "  egres: []\n",
     {"F:6:3: spec.egres: unknown field 'egres' (did you mean 'egress'?)"}},
    {"egress_mapping", FL_HEAD "  egress:\n    all: true\n", {"F:7:5: spec.egress: expected a list, found a mapping"}},
    {"egress_null", FL_HEAD "  egress:\n", {"F:7:1: spec.egress: expected a list, found nothing (write [] for none)"}},
    {"scope_no_target",
     FL_HEAD "  egress:\n    - mode: enforce\n",
     {"F:7:7: spec.egress[0]: missing the scope: give cgroup: PATH or all: true"}},
    {"scope_cgroup_and_all",
     FL_HEAD "  egress:\n    - cgroup: /web\n      all: true\n",
     {"F:8:7: spec.egress[0]: give one of cgroup and all, not both"}},
    {"scope_all_false",
     FL_HEAD "  egress:\n    - all: false\n",
     {"F:7:12: spec.egress[0].all: all: false selects nothing: write all: true or cgroup: PATH"}},
    {"scope_all_quoted",
     FL_HEAD "  egress:\n    - all: \"true\"\n",
     {"F:7:12: spec.egress[0].all: expected true or false, found 'true'"}},
    {"scope_cgroup_relative",
     FL_HEAD "  egress:\n    - cgroup: system.slice/web.service\n",
     {"F:7:15: spec.egress[0].cgroup: 'system.slice/web.service': a path below the cgroup2 root, starting with / "
      "(/system.slice/web.service)"}},
    {"scope_cgroup_dotdot",
     FL_HEAD "  egress:\n    - cgroup: /system.slice/../web\n",
     {"F:7:15: spec.egress[0].cgroup: '/system.slice/../web': no '..' or empty components"}},
    {"scope_mode_typo",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforced\n",
     {"F:8:13: spec.egress[0].mode: 'enforced': expected monitor or enforce"}},
    {"scope_default_allow_number",
     FL_HEAD "  egress:\n    - all: true\n      default_allow: 1\n",
     {"F:8:22: spec.egress[0].default_allow: expected true or false, found '1'"}},
    {"scope_deny_errno_typo",
     FL_HEAD "  egress:\n    - all: true\n      deny_errno: ECONREFUSED\n",
     {"F:8:19: spec.egress[0].deny_errno: 'ECONREFUSED': not a known errno name (EPERM, ECONNREFUSED, EACCES, ...)"}},
    {"scope_dns_ttl_min_zero",
     FL_HEAD "  egress:\n    - all: true\n      dns_ttl_min: 0s\n",
     {"F:8:20: spec.egress[0].dns_ttl_min: '0s': whole seconds from 1s to 7d"}},
    {"scope_dns_ttl_max_fraction",
     FL_HEAD "  egress:\n    - all: true\n      dns_ttl_max: 1500ms\n",
     {"F:8:20: spec.egress[0].dns_ttl_max: '1500ms': whole seconds from 1s to 7d"}},
    {"scope_dns_ttl_max_over_a_week",
     FL_HEAD "  egress:\n    - all: true\n      dns_ttl_max: 200h\n",
     {"F:8:20: spec.egress[0].dns_ttl_max: '200h': whole seconds from 1s to 7d"}},
    {"scope_dns_ttl_empty_clamp",
     FL_HEAD "  egress:\n    - all: true\n      dns_ttl_min: 10m\n      dns_ttl_max: 1m\n",
     {"F:9:20: spec.egress[0].dns_ttl_max: below dns_ttl_min (600s): the clamp would be empty"}},
    {"scope_dns_ttl_max_below_default_min",
     FL_HEAD "  egress:\n    - all: true\n      dns_ttl_max: 10s\n",
     {"F:8:20: spec.egress[0].dns_ttl_max: below dns_ttl_min (30s): the clamp would be empty"}},
    {"scope_exfil_cap_unit",
     FL_HEAD "  egress:\n    - all: true\n      exfil_cap: 10XB\n",
     {"F:8:18: spec.egress[0].exfil_cap: '10XB' has an unknown unit 'xb' (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"}},
    {"scope_exfil_cap_zero",
     FL_HEAD "  egress:\n    - all: true\n      exfil_cap: 0\n",
     {"F:8:18: spec.egress[0].exfil_cap: must be above 0 (leave it out for no cap)"}},
    {"scope_repeated",
     FL_HEAD "  egress:\n    - all: true\n    - all: true\n",
     {"F:8:7: spec.egress[1]: all is also the scope of spec.egress[0]: one scope each (merge their rules)"}},
    {"scope_repeated_cgroup",
     FL_HEAD "  egress:\n    - cgroup: /web/\n    - cgroup: /web\n",
     {"F:8:7: spec.egress[1]: cgroup /web is also the scope of spec.egress[0]: one scope each (merge their rules)"}},
    {"scope_unknown_field",
     FL_HEAD "  egress:\n    - all: true\n      rule: []\n",
     {"F:8:7: spec.egress[0].rule: unknown field 'rule' (did you mean 'rules'?)"}},
    {"scope_repeated_key",
     FL_HEAD "  egress:\n    - all: true\n      mode: monitor\n      mode: enforce\n",
     {"F:9:7: spec.egress[0].mode: repeated field (each field once)"}},
    {"rules_mapping",
     FL_HEAD "  egress:\n    - all: true\n      rules: {name: a}\n",
     {"F:8:14: spec.egress[0].rules: expected a list, found a mapping"}},
    {"rule_not_mapping",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - 10.0.0.0/8\n",
     {"F:10:11: spec.egress[0].rules[0]: expected a mapping, found '10.0.0.0/8'"}},
    {"rule_missing_name",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - action: deny\n          cidr: "
             "10.0.0.0/8\n",
     {"F:10:11: spec.egress[0].rules[0].name: missing (required)"}},
    {"rule_name_bad",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - name: -x\n          action: "
             "deny\n          cidr: 10.0.0.0/8\n",
     {"F:10:17: spec.egress[0].rules[0].name: '-x': letters, digits, '-', '_' and '.', starting with a letter or "
      "digit, at most 63"}},
    {"rule_missing_action",
     FL_HEAD
     "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - name: a\n          cidr: 10.0.0.0/8\n",
     {"F:10:11: spec.egress[0].rules[0].action: missing (required)"}},
    {"rule_action_permit",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - name: a\n          action: "
             "permit\n          cidr: 10.0.0.0/8\n",
     {"F:11:19: spec.egress[0].rules[0].action: 'permit': expected allow or deny"}},
    {"rule_cidr_and_host",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - name: a\n          action: "
             "deny\n          cidr: 10.0.0.0/8\n          host: example.com\n",
     {"F:13:11: spec.egress[0].rules[0]: give one of cidr and host, not both"}},
    {"rule_no_destination",
     FL_HEAD
     "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - name: a\n          action: deny\n",
     {"F:10:11: spec.egress[0].rules[0]: missing the destination: give cidr (10.0.0.0/8) or host (api.example.com, "
      "*.example.com)"}},
    {"rule_cidr_host_bits",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: deny, cidr: "
             "10.0.0.1/8}\n",
     {"F:10:41: spec.egress[0].rules[0].cidr: '10.0.0.1/8' has host bits set beyond the prefix length"}},
    {"rule_cidr_not_address",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: deny, cidr: "
             "300.1.1.1}\n",
     {"F:10:41: spec.egress[0].rules[0].cidr: '300.1.1.1' is not an IPv4 or IPv6 address or CIDR"}},
    {"rule_cidr_v6_too_long",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: deny, cidr: "
             "\"fd00::/129\"}\n",
     {"F:10:41: spec.egress[0].rules[0].cidr: 'fd00::/129': an IPv6 prefix is at most /128"}},
    {"rule_host_underscore",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, host: "
             "api_x.example.com}\n",
     {"F:10:42: spec.egress[0].rules[0].host: 'api_x.example.com': 'api_x': letters, digits and '-' only (lowercase)"}},
    {"rule_host_wildcard_tld",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, host: "
             "\"*.com\"}\n",
     {"F:10:42: spec.egress[0].rules[0].host: '*.com': a wildcard needs a suffix of two labels at least "
      "(*.example.com)"}},
    {"rule_host_wildcard_middle",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, host: "
             "\"api.*.example.com\"}\n",
     {"F:10:42: spec.egress[0].rules[0].host: 'api.*.example.com': a wildcard is only '*.' at the start "
      "(*.example.com)"}},
    {"rule_host_trailing_dot",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, host: "
             "example.com.}\n",
     {"F:10:42: spec.egress[0].rules[0].host: 'example.com.': write the name without the trailing dot"}},
    {"rule_host_address",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, host: "
             "10.1.2.3}\n",
     {"F:10:42: spec.egress[0].rules[0].host: '10.1.2.3': an address: write it as cidr"}},
    {"rule_ports_empty",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: []}\n",
     {"F:10:61: spec.egress[0].rules[0].ports: an empty list: leave ports out for any port"}},
    {"rule_port_too_big",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: [80, 70000]}\n",
     {"F:10:66: spec.egress[0].rules[0].ports[1]: '70000': ports are 1-65535"}},
    {"rule_port_range_backwards",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: [\"90-80\"]}\n",
     {"F:10:62: spec.egress[0].rules[0].ports[0]: '90-80': the range ends before it starts"}},
    {"rule_port_zero",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: [0]}\n",
     {"F:10:62: spec.egress[0].rules[0].ports[0]: '0': ports are 1-65535"}},
    {"rule_port_word",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: [https]}\n",
     {"F:10:62: spec.egress[0].rules[0].ports[0]: 'https' is not a port or port range (80 or 8000-8100)"}},
    {"rule_ports_scalar",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: 443}\n",
     {"F:10:61: spec.egress[0].rules[0].ports: expected a list, found '443'"}},
    {"rule_port_list_item",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, ports: [[80]]}\n",
     {"F:10:62: spec.egress[0].rules[0].ports[0]: expected a port (443) or a range (8000-8100), found a list"}},
    {"rule_proto_sctp",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, proto: sctp}\n",
     {"F:10:61: spec.egress[0].rules[0].proto: 'sctp': expected tcp or udp (leave it out for both)"}},
    {"rule_names_repeat",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8}\n        - {name: a, action: deny, cidr: 10.1.0.0/16}\n",
     {"F:11:18: spec.egress[0].rules[1].name: 'a' is also the name of rules[0]"}},
    {"rule_unknown_field",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, port: [80]}\n",
     {"F:10:54: spec.egress[0].rules[0].port: unknown field 'port' (did you mean 'ports'?)"}},
    {"rule_reason_list",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: a, action: allow, cidr: "
             "10.0.0.0/8, reason: [x]}\n",
     {"F:10:62: spec.egress[0].rules[0].reason: expected text, found a list"}},
    {"rules_nine_overlapping_denies",
     FL_HEAD "  egress:\n    - all: true\n      mode: enforce\n      rules:\n        - {name: d0, action: deny, cidr: "
             "10.0.0.0/8}\n        - {name: d1, action: deny, cidr: 10.0.0.0/9}\n        - {name: d2, action: deny, "
             "cidr: 10.0.0.0/10}\n        - {name: d3, action: deny, cidr: 10.0.0.0/11}\n        - {name: d4, action: "
             "deny, cidr: 10.0.0.0/12}\n        - {name: d5, action: deny, cidr: 10.0.0.0/13}\n        - {name: d6, "
             "action: deny, cidr: 10.0.0.0/14}\n        - {name: d7, action: deny, cidr: 10.0.0.0/15}\n        - "
             "{name: d8, action: deny, cidr: 10.0.0.0/16}\n",
     {"F:7:7: spec.egress[0].rules: more than 8 deny rules overlap on 10.0.0.0/16 (one rule per port entry counts)"}},
    {"json_proto",
     "{\"apiVersion\": \"faultline.dev/v1\", \"kind\": \"Policy\", \"metadata\": {\"name\": \"t\"},\n \"spec\": "
     "{\"egress\": [{\"all\": true, \"mode\": \"enforce\", \"rules\": [\n  {\"name\": \"r\", \"action\": \"deny\", "
     "\"cidr\": \"10.0.0.0/8\", \"proto\": \"icmp\"}]}]}}\n",
     {"F:3:66: spec.egress[0].rules[0].proto: 'icmp': expected tcp or udp (leave it out for both)"}},
    {"json_unknown_field",
     "{\"apiVersion\": \"faultline.dev/v1\", \"kind\": \"Policy\", \"metadata\": {\"name\": \"t\"},\n \"spec\": "
     "{\"egress\": [{\"all\": true, \"mode\": \"enforce\", \"rules\": [\n  {\"name\": \"r\", \"acton\": \"deny\", "
     "\"cidr\": \"10.0.0.0/8\"}]}]}}\n",
     {"F:3:3: spec.egress[0].rules[0].action: missing (required)",
      "F:3:17: spec.egress[0].rules[0].acton: unknown field 'acton' (did you mean 'action'?)"}},
    {"json_trailing_comma",
     "{\"apiVersion\": \"faultline.dev/v1\", \"kind\": \"Policy\",\n \"metadata\": {\"name\": \"t\"},,\n \"spec\": "
     "{\"egress\": []}}\n",
     {"F:2:28: <document>: a field name must be a plain word, found nothing"}},
    {"json_default_allow_string",
     "{\"apiVersion\": \"faultline.dev/v1\", \"kind\": \"Policy\", \"metadata\": {\"name\": \"t\"},\n \"spec\": "
     "{\"egress\": [{\"all\": true, \"default_allow\": \"false\"}]}}\n",
     {"F:2:53: spec.egress[0].default_allow: expected true or false, found 'false'"}},
    {"fault_kind_unknown",
     FL_HEAD "  faults:\n    - {name: f, kind: los, target: 10.0.0.2, percent: 5, duration: 30s}\n",
     {"F:7:23: spec.faults[0].kind: unknown fault kind 'los' (did you mean 'loss'?)"}},
    {"fault_missing_name",
     FL_HEAD "  faults:\n    - kind: loss\n      target: 10.0.0.2\n      percent: 5\n      duration: 30s\n",
     {"F:7:7: spec.faults[0].name: missing (required)"}},
    {"fault_missing_kind",
     FL_HEAD "  faults:\n    - name: f\n      target: 10.0.0.2\n",
     {"F:7:7: spec.faults[0].kind: missing (required): loss, latency, partition, ..., syscall, process, cpu, memory, "
      "disk"}},
    {"fault_unknown_field",
     FL_HEAD
     "  faults:\n    - name: f\n      kind: loss\n      target: 10.0.0.2\n      precent: 5\n      duration: 30s\n",
     {"F:10:7: spec.faults[0].precent: unknown field 'precent' for a loss fault (did you mean 'percent'?)"}},
    {"fault_percent_over",
     FL_HEAD
     "  faults:\n    - name: f\n      kind: loss\n      target: 10.0.0.2\n      percent: 200\n      duration: 30s\n",
     {"F:10:16: spec.faults[0].percent: --percent: '200' is outside 0-100"}},
    {"fault_duration_missing",
     FL_HEAD "  faults:\n    - name: f\n      kind: loss\n      target: 10.0.0.2\n      percent: 5\n",
     {"F:7:7: spec.faults[0]: --duration is required (at most 1h), e.g. --duration 30s"}},
    {"fault_duration_over_cap",
     FL_HEAD
     "  faults:\n    - name: f\n      kind: latency\n      target: 10.0.0.2\n      delay: 100ms\n      duration: 2h\n",
     {"F:11:17: spec.faults[0].duration: --duration 120m is over the cap of 1h"}},
    {"fault_flag_of_other_kind",
     FL_HEAD "  faults:\n    - name: f\n      kind: partition\n      target: 10.0.0.2\n      rate: 10mbit\n      "
             "duration: 30s\n",
     {"F:10:13: spec.faults[0].rate: --rate does not apply to a partition fault"}},
    {"fault_invocation_option",
     FL_HEAD "  faults:\n    - name: f\n      kind: loss\n      target: 10.0.0.2\n      percent: 5\n      duration: "
             "30s\n      json: true\n",
     {"F:12:7: spec.faults[0].json: 'json' is an option of one faultctl invocation, not of an experiment"}},
    {"fault_host_target",
     FL_HEAD "  faults:\n    - name: f\n      kind: loss\n      target: [10.0.0.2, db.internal]\n      percent: 5\n    "
             "  duration: 30s\n",
     {"F:9:26: spec.faults[0].target[1]: 'db.internal' is a host name: a policy names fault targets by address or CIDR "
      "(resolving names when the policy is read is not implemented)"}},
    {"fault_names_repeat",
     FL_HEAD "  faults:\n    - {name: f, kind: dns, domains: [example.com], duration: 30s}\n    - {name: f, kind: dns, "
             "domains: [example.org], duration: 30s}\n",
     {"F:8:7: spec.faults[1].name: 'f' is also the name of spec.faults[0]"}},
    {"fault_command_on_packet",
     FL_HEAD "  faults:\n    - name: f\n      kind: loss\n      target: 10.0.0.2\n      percent: 5\n      duration: "
             "30s\n      command: [./app]\n",
     {"F:7:7: spec.faults[0].command: only a syscall fault wraps a command"}},
    {"fault_syscall_errno",
     FL_HEAD "  faults:\n    - name: f\n      kind: syscall\n      syscall: [connect]\n      errno: ENOPE\n      "
             "duration: 30s\n      command: [./app]\n",
     {"F:10:14: spec.faults[0].errno: --errno ENOPE: not a known errno name (EIO, EACCES, ECONNREFUSED, ...)"}},
    {"fault_switch_value",
     FL_HEAD "  faults:\n    - name: f\n      kind: partition\n      force: yes\n      duration: 30s\n",
     {"F:9:14: spec.faults[0].force: expected true or false"}},
    {"alias_repeats_a_scope",
     FL_HEAD "  egress:\n    - &host {all: true, mode: enforce}\n    - *host\n",
     {"F:8:7: <document>: an alias (*name): spell each value out in a policy file"}},
    {"fault_not_mapping",
     FL_HEAD "  faults:\n    - loss\n",
     {"F:7:7: spec.faults[0]: expected a mapping, found 'loss'"}},
};

#undef FL_HEAD

class Malformed : public ::testing::TestWithParam<MalformedPolicy> {};

TEST_P(Malformed, EveryErrorWithLineColumnPathAndReason) {
  const MalformedPolicy& m = GetParam();
  PolicyParse p = parse_policy(m.text, run_fault_checker());
  std::vector<std::string> got;
  for (const auto& e : p.errors) got.push_back(e.render("F"));
  EXPECT_EQ(got, m.want) << "policy:\n" << m.text;
  EXPECT_FALSE(p.ok());
}

INSTANTIATE_TEST_SUITE_P(PolicyFile, Malformed, ::testing::ValuesIn(kMalformed),
                         [](const ::testing::TestParamInfo<MalformedPolicy>& i) { return std::string(i.param.name); });

TEST(PolicyFile, TheTableHoldsAtLeastFortyCases) { EXPECT_GE(std::size(kMalformed), 40u); }

TEST(PolicyFile, ErrorsAreCollectedNotJustTheFirst) {
  PolicyParse p = parse_policy(
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: t\nspec:\n  egress:\n    - all: true\n      "
      "mode: on\n      rules:\n        - {name: a, action: deny, cidr: 10.0.0.0/40}\n  faults:\n    - {name: f, kind: "
      "loss, target: 10.0.0.2, percent: 101, duration: 30s}\n",
      run_fault_checker());
  ASSERT_EQ(p.errors.size(), 3u);
  EXPECT_EQ(p.errors[0].path, "spec.egress[0].mode");
  EXPECT_EQ(p.errors[1].path, "spec.egress[0].rules[0].cidr");
  EXPECT_EQ(p.errors[2].path, "spec.faults[0].percent");
}

}  // namespace
}  // namespace faultline
