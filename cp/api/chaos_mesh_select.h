// A Chaos Mesh selector resolved against what faultcp knows (no Kubernetes
// API is read): a workload's selector picks the registered services (their
// labels; namespaces are the label `namespace`) and so their instances
// {agent, cgroup}, narrowed by nodes (agent hostnames) and nodeSelectors
// (agent labels); a PhysicalMachineChaos's picks agents (labels,
// physicalMachines: hostnames, address: the host of chaosd's address). Then
// the mode's draw over the matches. See docs/policy.md, "Chaos Mesh through
// faultcp".
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cp/storage/store.h"
#include "userspace/ops/chaos_mesh_import.h"
#include "userspace/orchestration/service.h"

namespace faultline::cp {

// What a selector matched: an instance of a service (its cgroup on its
// agent), or an agent (cgroup empty: host-wide).
struct ChaosMeshMatch {
  Agent agent;
  std::string service;
  std::string cgroup;
  [[nodiscard]] nlohmann::json to_json() const;
};

// An agent's labels (faultd --label), as a map.
[[nodiscard]] std::map<std::string, std::string> agent_labels(const Agent& a);

[[nodiscard]] std::vector<ServiceSpec> match_services(const ChaosMeshSelector& s,
                                                      const std::vector<ServiceSpec>& services);
// Every instance of a matching service whose agent is one of `agents` and
// meets nodes and nodeSelectors.
[[nodiscard]] std::vector<ChaosMeshMatch> match_instances(const ChaosMeshSelector& s,
                                                          const std::vector<ServiceSpec>& services,
                                                          const std::vector<Agent>& agents);
// The agents a PhysicalMachineChaos picks: those meeting the selector (its
// labels, expressions and physicalMachines, all given), and those address names.
[[nodiscard]] std::vector<ChaosMeshMatch> match_machines(const ChaosMeshSelector& s, const std::vector<Agent>& agents);

// The mode's draw over n matches, as Chaos Mesh draws: one, all, fixed N (at
// most n), fixed-percent P (floor(n*P/100)), random-max-percent P (a percent
// drawn in 0..P, then floor). `picked`: the indices drawn, ascending.
struct ChaosMeshDraw {
  std::vector<size_t> picked;
  int64_t percent = -1;  // random-max-percent: the percent drawn
  [[nodiscard]] nlohmann::json to_json(const std::string& mode, int64_t value, size_t matched) const;
};
[[nodiscard]] ChaosMeshDraw draw_matches(const ChaosMeshSelector& s, size_t n, std::mt19937_64& rng);

}  // namespace faultline::cp
