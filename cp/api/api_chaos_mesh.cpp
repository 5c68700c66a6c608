// POST /v1/chaos-mesh: a Chaos Mesh document whose selectors faultcp resolves
// against the registered services and agents (chaos_mesh_select.h), one
// experiment per instance (or agent) the mode draws, the draw audited.
#include <algorithm>
#include <set>

#include "cp/api/api_error.h"
#include "cp/api/chaos_mesh_select.h"
#include "cp/api/control_plane.h"
#include "cp/api/experiment_spec.h"

namespace faultline::cp {
namespace {

const std::vector<FieldRule> kChaosMeshFields = {{"document", JsonType::String, true}};

// The reader's errors: the first as the message, every one listed with its line and column.
HttpReply import_errors(const ChaosMeshImport& r) {
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& d : r.errors)
    errors.push_back({{"field", d.path}, {"reason", d.reason}, {"line", d.mark.line}, {"column", d.mark.column}});
  const auto& first = r.errors.front();
  return api_json(400,
                  {{"error", first.render("document")}, {"status", 400}, {"field", first.path}, {"errors", errors}});
}

// "host:port" or "[v6]:port" -> host and port.
std::pair<std::string, std::string> split_endpoint(const std::string& e) {
  if (!e.empty() && e.front() == '[') {
    const size_t close = e.find(']');
    return {e.substr(1, close - 1), close + 2 <= e.size() ? e.substr(close + 2) : ""};
  }
  const size_t colon = e.rfind(':');
  return {e.substr(0, colon), colon == std::string::npos ? "" : e.substr(colon + 1)};
}

// The fault's peers from spec.target: the endpoints of the services it
// selects, drawn by its mode, added to externalTargets; their port when they
// share one and no externalTargets were given. Why not, when nothing is left.
std::optional<std::string> add_target_peers(nlohmann::json& spec, const ChaosMeshSelector& t,
                                            const std::vector<ServiceSpec>& services, std::mt19937_64& rng,
                                            nlohmann::json& record) {
  std::vector<std::string> endpoints;
  for (const auto& svc : match_services(t, services))
    endpoints.insert(endpoints.end(), svc.endpoints.begin(), svc.endpoints.end());
  if (endpoints.empty()) return "spec.target.selector: no registered service with endpoints matches";
  const ChaosMeshDraw d = draw_matches(t, endpoints.size(), rng);
  record = d.to_json(t.mode, t.value, endpoints.size());
  if (d.picked.empty())
    return "spec.target.mode: " + t.mode + " drew none of the " + std::to_string(endpoints.size()) + " endpoints";
  const bool external = spec.contains("target");
  nlohmann::json peers = nlohmann::json::array();
  if (external) peers = spec["target"].is_array() ? spec["target"] : nlohmann::json::array({spec["target"]});
  std::set<std::string> ports;
  nlohmann::json drawn = nlohmann::json::array();
  for (size_t i : d.picked) {
    auto [host, port] = split_endpoint(endpoints[i]);
    drawn.push_back(endpoints[i]);
    ports.insert(port);
    if (std::find(peers.begin(), peers.end(), host) == peers.end()) peers.push_back(host);
  }
  record["endpoints"] = drawn;
  spec["target"] = peers.size() == 1 ? peers[0] : peers;
  if (!external && ports.size() == 1 && !ports.begin()->empty()) spec["port"] = *ports.begin();
  return std::nullopt;
}

}  // namespace

HttpReply ControlPlane::apply_chaos_mesh(const HttpRequest& req, const Principal& p) {
  std::string text = req.body;
  if (!is_yaml_type(req.header("content-type"))) {
    auto body = parse_body(req.body);
    if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
    const auto& j = std::get<nlohmann::json>(body);
    if (auto e = check_fields(j, kChaosMeshFields)) return e->reply();
    text = j["document"].get<std::string>();
  }
  ChaosMeshImportOptions o;
  o.resolve_names = false;  // faultcp resolves no names for its agents
  o.selectors_by_caller = true;
  ChaosMeshImport r = import_chaos_mesh(text, o);
  if (!r.ok()) return import_errors(r);

  auto agents = store_.agents(p.workspace_id);
  if (!agents) return storage_error(agents.error());
  auto rows = store_.services(p.workspace_id);
  if (!rows) return storage_error(rows.error());
  std::vector<ServiceSpec> services;
  for (const auto& row : *rows) {
    auto s = read_service_spec(nlohmann::json::parse(row.spec, nullptr, false));
    if (auto* e = std::get_if<SpecError>(&s))
      return api_error(500, "service " + row.name + " as stored does not read back: " + e->text());
    services.push_back(std::get<ServiceSpec>(std::move(s)));
  }
  if (!r.selector) return api_error(400, "spec.selector: missing", "spec.selector");
  const ChaosMeshSelector& sel = *r.selector;
  const bool machines = r.kind == "PhysicalMachineChaos";
  const auto matches = machines ? match_machines(sel, *agents) : match_instances(sel, services, *agents);
  if (matches.empty())
    return api_error(404,
                     machines ? "spec.selector: no agent of the workspace matches"
                              : "spec.selector: no instance of a registered service matches (" +
                                    std::to_string(services.size()) + " services looked at)",
                     "spec.selector");
  std::mt19937_64 rng(std::random_device{}());
  const ChaosMeshDraw d = draw_matches(sel, matches.size(), rng);
  if (d.picked.empty())
    return api_error(
        409,
        "spec.mode: " + sel.mode + " drew none of the " + std::to_string(matches.size()) + " matches: nothing started",
        "spec.mode");
  nlohmann::json record = d.to_json(sel.mode, sel.value, matches.size());
  record["matches"] = nlohmann::json::array();
  for (const auto& m : matches) record["matches"].push_back(m.to_json());
  record["drawn"] = nlohmann::json::array();
  for (size_t i : d.picked) record["drawn"].push_back(matches[i].to_json());

  nlohmann::json spec = r.spec;
  if (r.target) {
    nlohmann::json target_record;
    if (auto why = add_target_peers(spec, *r.target, services, rng, target_record)) return api_error(404, *why);
    record["target"] = target_record;
  }
  const nlohmann::json source = {{"kind", r.kind}, {"name", r.name}, {"action", r.action}};
  std::vector<PlannedExperiment> plans;
  for (size_t i : d.picked) {
    nlohmann::json one = spec;
    if (!matches[i].cgroup.empty()) one["cgroup"] = matches[i].cgroup;
    if (auto e = check_experiment_spec(one)) return e->reply();
    nlohmann::json detail = {{"agent_id", matches[i].agent.id},
                             {"spec", one},
                             {"chaos_mesh", source},
                             {"drawn", matches[i].to_json()},
                             {"draw", d.to_json(sel.mode, sel.value, matches.size())}};
    plans.push_back(PlannedExperiment{matches[i].agent, std::move(one), std::move(detail)});
  }
  nlohmann::json applied = source;
  applied["selector"] = sel.to_json();
  if (r.target) applied["target"] = r.target->to_json();
  applied["draw"] = record;
  auto created =
      start_experiments(p, plans, "spec.selector", ExtraAudit{"chaos_mesh.apply", "chaos-mesh:" + r.name, applied});
  if (auto* reply = std::get_if<HttpReply>(&created)) return *reply;
  return api_json(201, {{"experiments", std::get<nlohmann::json>(created)},
                        {"chaos_mesh", source},
                        {"draw", record},
                        {"notes", r.notes}});
}

}  // namespace faultline::cp
