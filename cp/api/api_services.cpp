// The orchestration's services and facts: registering a service, what faultcp
// knows of it (its profile, its SLO read from Prometheus), and the validator
// asked whether automation may run a fault on it now. The validator reads the
// facts here itself (ServiceStoreFacts), never from the request.
#include <cmath>

#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/api/service_facts.h"
#include "userspace/orchestration/catalogue.h"
#include "userspace/orchestration/validator.h"

namespace faultline::cp {
namespace services_detail {

// Where a profile's dependencies come from: nothing reports flows yet.
constexpr const char* kDependenciesSource =
    "none yet: faultd does not report its flows to faultcp (the autopilot's reports are not built), so no dependency "
    "has been observed";
constexpr const char* kReadinessSource =
    "an instance is ready when its agent polled faultcp within agent_ready_within_ms and neither its kill switch nor "
    "the workspace's is engaged; faultcp does not probe health_url";

nlohmann::json service_json(const ServiceRow& row) {
  nlohmann::json j = nlohmann::json::parse(row.spec, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  j["id"] = row.id;
  j["created_ms"] = row.created_ms;
  j["created_by"] = row.created_by;
  return j;
}

const std::vector<FieldRule> kValidateFields = {{"service", JsonType::String, true},
                                                {"fault", JsonType::String, true},
                                                {"target", JsonType::String},
                                                {"duration_s", JsonType::Integer, true}};

const std::vector<FieldRule> kRenderFields = {{"params", JsonType::Object, true}, {"cgroup", JsonType::String, true}};

nlohmann::json template_json(const CatalogueTemplate& t) {
  nlohmann::json d = t.definition();
  d["sha256"] = t.sha256();
  return d;
}

}  // namespace services_detail

using namespace services_detail;

HttpReply ControlPlane::create_service(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  auto spec = read_service_spec(std::get<nlohmann::json>(body));
  if (auto* e = std::get_if<SpecError>(&spec)) return ApiError{400, e->field, e->message}.reply();
  const auto& s = std::get<ServiceSpec>(spec);
  // Every instance's agent is one of this workspace's.
  for (size_t i = 0; i < s.instances.size(); ++i) {
    auto a = store_.agent(p.workspace_id, s.instances[i].agent);
    if (!a) return storage_error(a.error());
    if (!*a)
      return ApiError{400, "instances[" + std::to_string(i) + "].agent",
                      "no agent " + std::to_string(s.instances[i].agent) + " in this workspace"}
          .reply();
  }
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.insert_service(p.workspace_id, s.name, service_spec_json(s).dump(), now_ms(), p.actor());
  if (!row) {
    if (row.error().err == kConflict) return api_error(409, row.error().message, "name");
    return storage_error(row.error());
  }
  if (auto a = audit(p, "service.create", "service:" + std::to_string(row->id),
                     {{"name", s.name},
                      {"chaos", s.chaos_enabled ? "enabled" : "disabled"},
                      {"instances", s.instances.size()},
                      {"stateful", s.stateful}});
      !a)
    return storage_error(a.error());
  if (auto done = tx.commit(); !done) return storage_error(done.error());
  return api_json(201, service_json(*row));
}

HttpReply ControlPlane::list_services(const Principal& p) {
  auto rows = store_.services(p.workspace_id);
  if (!rows) return storage_error(rows.error());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : *rows) list.push_back(service_json(r));
  return api_json(200, {{"services", list}});
}

HttpReply ControlPlane::get_service(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such service");
  auto row = store_.service(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such service");
  return api_json(200, service_json(**row));
}

HttpReply ControlPlane::delete_service(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such service");
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.service(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such service");
  auto gone = store_.delete_service(p.workspace_id, *id);
  if (!gone) return storage_error(gone.error());
  if (auto a = audit(p, "service.delete", "service:" + std::to_string(*id), {{"name", (*row)->name}}); !a)
    return storage_error(a.error());
  if (auto done = tx.commit(); !done) return storage_error(done.error());
  return api_json(200, {{"deleted", true}, {"id", *id}});
}

HttpReply ControlPlane::service_profile(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such service");
  auto row = store_.service(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such service");
  ServiceStoreFacts facts(store_, p.workspace_id, now_ms(), config_.agent_ready_within.count(),
                          config_.prometheus.get());
  auto f = facts.facts_of(**row);
  if (!f) return storage_error(f.error());
  auto inst = facts.instances((*f)->spec);
  if (!inst) return storage_error(inst.error());
  nlohmann::json instances = nlohmann::json::array();
  for (const auto& i : *inst) {
    nlohmann::json j = {{"agent", i.instance.agent}, {"cgroup", i.instance.cgroup}, {"ready", i.ready}};
    if (!i.reason.empty()) j["reason"] = i.reason;
    j["last_seen_ms"] = i.last_seen_ms ? nlohmann::json(*i.last_seen_ms) : nlohmann::json(nullptr);
    instances.push_back(j);
  }
  const auto& s = (*f)->spec;
  return api_json(200, {{"id", *id},
                        {"service", s.name},
                        {"replicas_ready", (*f)->replicas_ready},
                        {"replicas", s.instances.size()},
                        {"min_available", s.min_available ? nlohmann::json(*s.min_available) : nlohmann::json(nullptr)},
                        {"stateful", s.stateful},
                        {"chaos", s.chaos_enabled ? "enabled" : "disabled"},
                        {"window", s.window.describe()},
                        {"instances", instances},
                        {"readiness_source", kReadinessSource},
                        {"agent_ready_within_ms", config_.agent_ready_within.count()},
                        {"dependencies", (*f)->dependencies},
                        {"dependencies_source", kDependenciesSource}});
}

HttpReply ControlPlane::service_slo(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such service");
  auto row = store_.service(p.workspace_id, *id);
  if (!row) return storage_error(row.error());
  if (!*row) return api_error(404, "no such service");
  if (!config_.prometheus) return api_error(503, "faultcp was started without --prometheus-url: no SLO to read");
  auto spec = read_service_spec(nlohmann::json::parse((*row)->spec, nullptr, false));
  if (auto* e = std::get_if<SpecError>(&spec))
    return api_error(500, "the stored service does not read back: " + e->text());
  const auto& s = std::get<ServiceSpec>(spec);
  auto r = read_slo(*config_.prometheus, s);
  if (!r) return api_error(502, "the SLO could not be read: " + r.error().describe());
  return api_json(200, {{"id", *id},
                        {"service", s.name},
                        {"burn_rate_5m", r->burn_rate_5m},
                        {"burn_rate_1h", r->burn_rate_1h},
                        {"budget_remaining_30d", r->budget_remaining},
                        {"series",
                         {{"burn_rate_5m", slo_selector(s, s.slo.burn_rate_5m)},
                          {"burn_rate_1h", slo_selector(s, s.slo.burn_rate_1h)},
                          {"budget_remaining_30d", slo_selector(s, s.slo.budget_remaining)}}},
                        {"prometheus", config_.prometheus->where()},
                        {"read_ms", now_ms()}});
}

HttpReply ControlPlane::validate_proposal(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kValidateFields)) return e->reply();
  Proposal prop{j["service"].get<std::string>(), j["fault"].get<std::string>(),
                j.contains("target") ? j["target"].get<std::string>() : "", j["duration_s"].get<int64_t>()};
  if (auto e = check_proposal(prop)) return ApiError{400, e->field, e->message}.reply();
  ServiceStoreFacts facts(store_, p.workspace_id, now_ms(), config_.agent_ready_within.count(),
                          config_.prometheus.get());
  const SystemClock host;
  return api_json(200, validate(prop, facts, config_.clock ? *config_.clock : host).to_json());
}

HttpReply ControlPlane::list_catalogue() {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : catalogue()) list.push_back(template_json(t));
  return api_json(200, {{"templates", list}});
}

HttpReply ControlPlane::get_template(const PathParams& params) {
  const CatalogueTemplate* t = find_template(params.at("name"));
  if (!t) return api_error(404, "no template named " + params.at("name") + " (one of " + fault_names() + ")");
  return api_json(200, template_json(*t));
}

HttpReply ControlPlane::render_catalogue_template(const HttpRequest& req, const PathParams& params) {
  const CatalogueTemplate* t = find_template(params.at("name"));
  if (!t) return api_error(404, "no template named " + params.at("name") + " (one of " + fault_names() + ")");
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kRenderFields)) return e->reply();
  if (auto e = check_params(*t, j["params"])) return ApiError{400, "params." + e->field, e->message}.reply();
  auto r = render_template(*t, j["params"], TemplateInstance{j["cgroup"].get<std::string>()});
  if (!r) return ApiError{400, "cgroup", r.error().message}.reply();
  return api_json(200, {{"template", t->name},
                        {"version", t->version},
                        {"template_sha256", t->sha256()},
                        {"params", j["params"]},
                        {"instance", {{"cgroup", j["cgroup"]}}},
                        {"experiment", r->spec}});
}

}  // namespace faultline::cp
