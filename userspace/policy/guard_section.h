// The guard's section of the policy file on its own: `spec.guard` of a Policy,
// or the bare form users write ({mode, default_allow, rules}), from JSON or
// YAML, read by the policy file's own reader (same checks, same messages).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/policy/policy.h"

namespace faultline {

// A JSON value: a whole Policy document (its spec.guard, required) or the bare
// section. Every problem is one line "FIELD.PATH: reason" of the error, bad input.
[[nodiscard]] Result<GuardPolicy> parse_guard_section(const nlohmann::json& j);

struct GuardSectionParse {
  GuardPolicy policy;
  std::vector<PolicyDiagnostic> errors;  // sorted by line, column; empty: valid
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// YAML or JSON text, either form; every error with its line and column
// (render() them with the file name).
[[nodiscard]] GuardSectionParse parse_guard_text(std::string_view text);

}  // namespace faultline
