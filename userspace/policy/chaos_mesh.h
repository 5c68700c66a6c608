// Chaos Mesh NetworkChaos documents (chaos-mesh.org/v1alpha1) read as the
// `faultctl run` packet fault they mean on this host: the same engine, the
// same caps. What a host agent cannot honour (pod selectors) is refused with
// what to write instead. See docs/policy.md, "Chaos Mesh import".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "userspace/policy/policy.h"

namespace faultline {

inline constexpr std::string_view kChaosMeshApiVersion = "chaos-mesh.org/v1alpha1";

struct ChaosMeshFault {
  std::string name;                // metadata.name
  std::string action;              // delay, loss, ...
  std::vector<std::string> words;  // after "faultctl run": KIND --flag value ...
  // The field each flag came from, so a refusal by the run parser names it.
  std::vector<std::pair<std::string, PolicyDiagnostic>> flag_fields;  // "--percent" -> where
  std::vector<std::string> notes;  // fields read but with no effect here, said out loud
};

struct ChaosMeshRead {
  ChaosMeshFault fault;
  std::vector<PolicyDiagnostic> errors;  // empty: fault is complete
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Whether a document is a Chaos Mesh one (its apiVersion), read loosely: for
// `faultctl apply -f` to choose between a Policy and a NetworkChaos.
[[nodiscard]] bool looks_like_chaos_mesh(std::string_view text);

// Reads one NetworkChaos document; every error with its line and column.
[[nodiscard]] ChaosMeshRead read_network_chaos(std::string_view text);

}  // namespace faultline
