// Chaos Mesh documents (chaos-mesh.org/v1alpha1) read as the typed experiment
// they mean on this host: a NetworkChaos becomes a packet fault, a
// StressChaos's cpu stressor a cpu fault, a PodChaos pod-kill a process kill,
// a PhysicalMachineChaos (chaosd's attacks) the packet, cpu, memory, process or
// disk fault of its action.
// The import builds the JSON the
// family readers take and reads it with experiment_from_json(): the same
// fields, caps and messages as every other door. What a host agent cannot
// honour (pod selectors) is refused with what to write instead; `mode: one`
// with `labelSelectors {service: NAME}` (what `faultctl catalogue render
// --format chaos-mesh` writes) is the one instance whose cgroup the caller
// names. It lives in ops/ because it builds experiments of several fault
// families, which the policy layer may not include. See docs/policy.md,
// "Chaos Mesh import".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/ops/experiment.h"
#include "userspace/policy/policy.h"

namespace faultline {

inline constexpr std::string_view kChaosMeshApiVersion = "chaos-mesh.org/v1alpha1";

struct ChaosMeshImportOptions {
  // The cgroup v2 path of the instance a `mode: one` selector
  // (labelSelectors {service: NAME}) picks: a host agent reads no Kubernetes
  // API, so the caller names it (`faultctl apply --cgroup PATH`). Empty: such
  // a selector is refused.
  std::string cgroup;
  // Whether a host name in externalTargets is resolved now (as faultctl run
  // --target NAME is); false: refused, naming the field (the fuzz target,
  // which must not query DNS).
  bool resolve_names = true;
};

struct ChaosMeshImport {
  std::string name;                      // metadata.name
  std::string kind;                      // NetworkChaos, StressChaos, PodChaos, PhysicalMachineChaos
  std::string action;                    // delay, loss, ..., stress-cpu
  std::string service;                   // labelSelectors' service, when one was selected
  nlohmann::json spec;                   // the experiment's JSON, as experiment_from_json() reads it
  std::optional<Experiment> experiment;  // set when errors is empty
  std::vector<std::string> notes;        // fields read but with no effect here, said out loud
  std::vector<PolicyDiagnostic> errors;  // each at its line and column, naming the field
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Whether a document is a Chaos Mesh one (its apiVersion), read loosely: for
// `faultctl apply -f` to choose between a Policy and a Chaos Mesh file.
[[nodiscard]] bool looks_like_chaos_mesh(std::string_view text);

// Reads one NetworkChaos, StressChaos, PodChaos or PhysicalMachineChaos document into the typed experiment;
// every error with its line and column. Host names in externalTargets are
// resolved now (as `faultctl run --target NAME` does).
[[nodiscard]] ChaosMeshImport import_chaos_mesh(std::string_view text, const ChaosMeshImportOptions& options = {});

}  // namespace faultline
