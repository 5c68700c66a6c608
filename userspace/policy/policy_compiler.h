// A policy's egress scopes compiled into the map images the sockaddr programs
// read (bpf/sockaddr.bpf.c: fl_sa_policy, fl_sa_deny, fl_sa_allow,
// fl_sa_rule_hits), without touching the kernel; and what today's maps cannot
// express, said as such.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "faultline/dns_abi.h"
#include "faultline/sockaddr_abi.h"
#include "userspace/net/egress_rules.h"
#include "userspace/policy/policy.h"

namespace faultline {

// One address rule as the tries hold it: a policy rule with a cidr, once per
// entry of its ports list. Its index in CompiledScope::rules is the id the
// buckets, the decision events and fl_sa_rule_hits use.
struct CompiledRuleId {
  size_t policy_rule = 0;  // index into EgressScope::rules
  EgressRule rule;
};

// One host rule as the watched names hold it, once per entry of its ports
// list; ids follow the address rules' (CompiledScope::rules).
struct CompiledHostRule {
  size_t policy_rule = 0;
  uint32_t id = 0;
  PortRange ports;
};

// A watched name of a scope (fl_dns_watch; the generation is set at apply).
struct WatchedName {
  std::string name;  // "api.example.com", or "*.example.com"
  fl_dns_watch_key key{};
  fl_dns_watch value{};
};

struct CompiledScope {
  const EgressScope* scope = nullptr;
  std::string attach;  // where the programs would be attached
  fl_sa_policy policy{};
  std::vector<CompiledRuleId> rules;
  CompiledTrie deny, allow;
  std::vector<CompiledHostRule> host_rules;
  std::vector<WatchedName> watched;
  std::vector<std::string> not_compiled;  // what the maps cannot hold, in words
  // The rules as the guard takes them (GuardOptions::rules), ids as above.
  [[nodiscard]] std::vector<EgressRule> egress_rules() const;
  // Rule counters: address rules, then host rules.
  [[nodiscard]] uint32_t rule_count() const { return static_cast<uint32_t>(rules.size() + host_rules.size()); }
};

struct CompiledPolicy {
  std::string name;
  std::vector<CompiledScope> scopes;
  std::vector<std::string> notes;   // policy-wide limits of today's maps and commands
  std::vector<std::string> faults;  // "NAME (KIND)"
};

// The policy must have parsed without errors (parse_policy()), and outlive the
// result, which points into it. Fails only on
// what parse_policy() checks too (overlaps beyond a bucket).
[[nodiscard]] Result<CompiledPolicy> compile_policy(const Policy& p);

// `faultctl policy compile` output: per scope, the maps, entry counts and bytes.
[[nodiscard]] std::string compiled_text(const CompiledPolicy& c);
// The same with every entry decoded and as bytes (hex), one JSON document.
[[nodiscard]] std::string compiled_json(const CompiledPolicy& c);

}  // namespace faultline
