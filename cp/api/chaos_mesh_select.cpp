#include "cp/api/chaos_mesh_select.h"

#include <algorithm>
#include <numeric>

namespace faultline::cp {
namespace {

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool carries(const std::map<std::string, std::string>& have, const std::map<std::string, std::string>& want) {
  return std::all_of(want.begin(), want.end(), [&](const auto& kv) {
    auto it = have.find(kv.first);
    return it != have.end() && it->second == kv.second;
  });
}

}  // namespace

nlohmann::json ChaosMeshMatch::to_json() const {
  nlohmann::json j = {{"agent", agent.id}, {"hostname", agent.hostname}};
  if (!service.empty()) j["service"] = service;
  if (!cgroup.empty()) j["cgroup"] = cgroup;
  return j;
}

std::map<std::string, std::string> agent_labels(const Agent& a) {
  std::map<std::string, std::string> out;
  auto j = nlohmann::json::parse(a.labels, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items())
    if (v.is_string()) out[k] = v.get<std::string>();
  return out;
}

std::vector<ServiceSpec> match_services(const ChaosMeshSelector& s, const std::vector<ServiceSpec>& services) {
  std::vector<ServiceSpec> out;
  for (const auto& svc : services) {
    if (!s.namespaces.empty()) {
      auto ns = svc.labels.find("namespace");
      if (ns == svc.labels.end() || !listed(s.namespaces, ns->second)) continue;
    }
    if (s.matches_labels(svc.labels)) out.push_back(svc);
  }
  return out;
}

std::vector<ChaosMeshMatch> match_instances(const ChaosMeshSelector& s, const std::vector<ServiceSpec>& services,
                                            const std::vector<Agent>& agents) {
  std::vector<ChaosMeshMatch> out;
  for (const auto& svc : match_services(s, services))
    for (const auto& inst : svc.instances) {
      auto a = std::find_if(agents.begin(), agents.end(), [&](const Agent& x) { return x.id == inst.agent; });
      if (a == agents.end()) continue;
      if (!s.nodes.empty() && !listed(s.nodes, a->hostname)) continue;
      if (!s.node_labels.empty() && !carries(agent_labels(*a), s.node_labels)) continue;
      out.push_back({*a, svc.name, inst.cgroup});
    }
  return out;
}

std::vector<ChaosMeshMatch> match_machines(const ChaosMeshSelector& s, const std::vector<Agent>& agents) {
  const bool by_selector = !s.labels.empty() || !s.expressions.empty() || !s.machines.empty();
  std::vector<ChaosMeshMatch> out;
  for (const auto& a : agents) {
    const bool selected =
        by_selector && s.matches_labels(agent_labels(a)) && (s.machines.empty() || listed(s.machines, a.hostname));
    if (selected || listed(s.addresses, a.hostname)) out.push_back({a, "", ""});
  }
  return out;
}

ChaosMeshDraw draw_matches(const ChaosMeshSelector& s, size_t n, std::mt19937_64& rng) {
  ChaosMeshDraw d;
  size_t count = n;
  if (s.mode == "one") {
    count = std::min<size_t>(1, n);
  } else if (s.mode == "fixed") {
    count = std::min<size_t>(static_cast<size_t>(s.value), n);
  } else if (s.mode == "fixed-percent") {
    count = n * static_cast<size_t>(s.value) / 100;
  } else if (s.mode == "random-max-percent") {
    d.percent = std::uniform_int_distribution<int64_t>(0, s.value)(rng);
    count = n * static_cast<size_t>(d.percent) / 100;
  }
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  if (count < n) std::shuffle(all.begin(), all.end(), rng);
  d.picked.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count));
  std::sort(d.picked.begin(), d.picked.end());
  return d;
}

nlohmann::json ChaosMeshDraw::to_json(const std::string& mode, int64_t value, size_t matched) const {
  nlohmann::json j = {{"mode", mode}, {"matched", matched}, {"picked", picked.size()}};
  if (value > 0) j["value"] = value;
  if (percent >= 0) j["percent_drawn"] = percent;
  return j;
}

}  // namespace faultline::cp
