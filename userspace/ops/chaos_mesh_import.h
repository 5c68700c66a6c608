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

#include <cstdint>
#include <map>
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
  // faultcp: spec.mode, spec.value, spec.selector (and a NetworkChaos's
  // spec.target, a PhysicalMachineChaos's spec.address) are read into
  // ChaosMeshImport::selector and target for the control plane to resolve
  // against its registered services and agents; no --cgroup is needed.
  bool selectors_by_caller = false;
};

// One of Chaos Mesh's expressionSelectors: In, NotIn, Exists, DoesNotExist.
struct ChaosMeshExpression {
  std::string key, op;
  std::vector<std::string> values;
};

// A Chaos Mesh selector with its mode, as the control plane resolves it: no
// Kubernetes API is read. For a workload (NetworkChaos, StressChaos,
// PodChaos) it picks registered services, narrowed by the agents their
// instances run on; for a PhysicalMachineChaos, agents.
struct ChaosMeshSelector {
  std::vector<std::string> namespaces;             // a service's label `namespace` is one of them
  std::map<std::string, std::string> labels;       // labelSelectors: every one
  std::vector<ChaosMeshExpression> expressions;    // expressionSelectors: every one
  std::vector<std::string> nodes;                  // the instance's agent's hostname is one of them
  std::map<std::string, std::string> node_labels;  // nodeSelectors: the instance's agent's labels
  std::vector<std::string> machines;               // physicalMachines: agents by hostname
  std::vector<std::string> addresses;              // address: agents by the host of chaosd's address
  std::string mode = "all";                        // one, all, fixed, fixed-percent, random-max-percent
  int64_t value = 0;                               // fixed: how many; the percent modes: 1-100
  // Whether labels carry every labelSelector and meet every expression.
  [[nodiscard]] bool matches_labels(const std::map<std::string, std::string>& have) const;
  [[nodiscard]] nlohmann::json to_json() const;
};

struct ChaosMeshImport {
  std::string name;                      // metadata.name
  std::string kind;                      // NetworkChaos, StressChaos, PodChaos, PhysicalMachineChaos
  std::string action;                    // delay, loss, ..., stress-cpu
  std::string service;                   // labelSelectors' service, when one was selected
  nlohmann::json spec;                   // the experiment's JSON, as experiment_from_json() reads it
  std::optional<Experiment> experiment;  // set when errors is empty (but for a target the caller resolves)
  std::vector<std::string> notes;        // fields read but with no effect here, said out loud
  std::vector<PolicyDiagnostic> errors;  // each at its line and column, naming the field
  // With options.selectors_by_caller: spec.selector and its mode; a
  // NetworkChaos's spec.target (the peers: those services' endpoints).
  std::optional<ChaosMeshSelector> selector, target;
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Whether a document is a Chaos Mesh one (its apiVersion), read loosely: for
// `faultctl apply -f` to choose between a Policy and a Chaos Mesh file.
[[nodiscard]] bool looks_like_chaos_mesh(std::string_view text);

// Reads one NetworkChaos, StressChaos, PodChaos or PhysicalMachineChaos document into the typed experiment;
// every error with its line and column. Host names in externalTargets are
// resolved now (as `faultctl run --target NAME` does).
[[nodiscard]] ChaosMeshImport import_chaos_mesh(std::string_view text, const ChaosMeshImportOptions& options = {});

// Whether a document is a chaosd attack (a JSON object, no apiVersion): for
// `faultctl apply -f` to choose its reader.
[[nodiscard]] bool looks_like_chaosd_attack(std::string_view text);

// Reads chaosd's attack JSON, {"network" | "stress" | "process" | "disk": the
// body chaosd's HTTP API takes at /api/attack/KIND}, into the experiment the
// PhysicalMachineChaos of the same action yields (the same readers); errors
// name the attack's fields ("network.latency") at their line and column.
[[nodiscard]] ChaosMeshImport import_chaosd_attack(std::string_view text, const ChaosMeshImportOptions& options = {});

}  // namespace faultline
