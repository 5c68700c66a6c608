// A policy written back as a file (the egress section and the name): the
// canonical form `faultctl policy apply` stores beside the maps and `export`
// prints, in JSON or YAML. Reading either back gives the same policy, so
// export -> apply -> export prints the same bytes.
#pragma once

#include <string>

#include "userspace/policy/policy.h"

namespace faultline {

// One JSON document, fields in the file's order, two-space indent, newline-terminated.
[[nodiscard]] std::string policy_json_text(const Policy& p);
// policy_json_text() as it was first written, through an nlohmann document:
// what the tests hold the direct writer to.
[[nodiscard]] std::string policy_json_text_by_document(const Policy& p);
// The same document in block YAML (strings double-quoted).
[[nodiscard]] std::string policy_yaml_text(const Policy& p);

// Reads back what policy_json_text() wrote (the applied policy's stored text),
// without the file parser: that text is ours, and yaml-cpp takes seconds over
// tens of thousands of rules. Anything else is refused, not guessed at.
[[nodiscard]] Result<Policy> policy_from_canonical_json(std::string_view text);

// One rule as reports and diffs show it: "deny 10.0.0.0/8 ports 443,8000-8100 tcp".
[[nodiscard]] std::string rule_summary(const PolicyRule& r);
// A scope's settings: "enforce, default deny, deny errno EPERM, exfil cap 4096 B".
[[nodiscard]] std::string scope_settings(const EgressScope& s);

}  // namespace faultline
