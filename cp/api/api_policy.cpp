// Policy distribution: a workspace's policy bundle (a policy file's egress
// section and the selector of the agents that run it), versioned; checked with
// the CLI's own parser and apply checks before anything is stored, so a bad
// bundle never reaches an agent. Agents are given the newest version at their
// next poll (api_agents.cpp) and report what they run.
#include <algorithm>

#include "cp/api/agent_selector.h"
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "userspace/policy/policy.h"
#include "userspace/policy/policy_apply.h"
#include "userspace/policy/policy_compiler.h"
#include "userspace/policy/policy_writer.h"

namespace faultline::cp {
namespace {

// A check_appliable message starts with the field it is about
// ("spec.egress[0].rules[2] (name): ..."); a scope's label otherwise.
std::string field_of(const std::string& message) {
  if (message.rfind("spec.", 0) != 0) return "spec.egress";
  return message.substr(0, message.find_first_of(" :"));
}

nlohmann::json summary_json(const Policy& p, const CompiledPolicy& c) {
  nlohmann::json scopes = nlohmann::json::array();
  for (const auto& s : c.scopes) {
    scopes.push_back({{"scope", s.scope->label()},
                      {"mode", s.scope->mode == PolicyMode::Enforce ? "enforce" : "monitor"},
                      {"default_allow", s.scope->default_allow},
                      {"rules", s.scope->rules.size()},
                      {"deny_prefixes", s.deny.entries.size()},
                      {"allow_prefixes", s.allow.entries.size()},
                      {"not_compiled", s.not_compiled}});
  }
  return {{"name", p.name}, {"scopes", scopes}, {"notes", c.notes}};
}

}  // namespace

// A bundle as a body: the policy file itself (Content-Type application/yaml,
// or a JSON object with apiVersion), which keeps the selector of the newest
// version (all agents if none); or {"policy": FILE, "selector": {...}} where
// FILE is the file's text (YAML or JSON) or its JSON object. Errors name the
// field ("policy.spec.egress[0].cidr" in the envelope, "spec.egress[0].cidr"
// for a bare file) and, where the text was given, its line and column.
std::variant<ControlPlane::StagedPolicy, HttpReply> ControlPlane::read_bundle(const HttpRequest& req,
                                                                              const Principal& p) {
  StagedPolicy out;
  std::string text, prefix;
  bool text_given = true;
  std::optional<nlohmann::json> selector;
  const bool yaml = is_yaml_type(req.header("content-type"));
  if (!yaml) {
    auto body = parse_body(req.body);
    if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
    auto& j = std::get<nlohmann::json>(body);
    if (j.contains("apiVersion") || j.contains("kind")) {
      text = j.dump();
      text_given = false;  // line:column of our own dump would mislead
    } else {
      // "policy" is a string or an object: checked by hand (check_fields takes one type).
      nlohmann::json rest = j;
      rest.erase("policy");
      if (auto e = check_fields(rest, {{"selector", JsonType::Object}, {"dry_run", JsonType::Boolean}})) {
        return e->reply();
      }
      if (!j.contains("policy")) return ApiError{400, "policy", "is required"}.reply();
      if (j["policy"].is_string()) {
        text = j["policy"].get<std::string>();
      } else if (j["policy"].is_object()) {
        text = j["policy"].dump();
        text_given = false;
      } else {
        return ApiError{400, "policy", "must be the policy file's text or its JSON object"}.reply();
      }
      prefix = "policy.";
      if (j.contains("selector")) selector = j["selector"];
      out.dry_run = j.value("dry_run", false);
    }
  } else {
    text = req.body;
  }
  if (auto d = req.query_param("dry_run")) out.dry_run = out.dry_run || *d == "true" || *d == "1";

  PolicyParse parsed = parse_policy(text);
  if (!parsed.ok()) {
    nlohmann::json errors = nlohmann::json::array();
    for (const auto& d : parsed.errors) {
      nlohmann::json e{{"field", prefix + d.path}, {"reason", d.reason}};
      if (text_given && d.mark.line > 0) e.update({{"line", d.mark.line}, {"column", d.mark.column}});
      errors.push_back(e);
    }
    const auto& first = parsed.errors.front();
    std::string where;
    if (text_given && first.mark.line > 0)
      where = " (line " + std::to_string(first.mark.line) + ", column " + std::to_string(first.mark.column) + ")";
    nlohmann::json reply{{"error", prefix + first.path + ": " + first.reason + where},
                         {"status", 400},
                         {"field", prefix + first.path},
                         {"errors", errors}};
    return api_json(400, reply);
  }
  if (auto st = check_appliable(parsed.policy, false); !st) {
    const std::string& m = st.error().message;
    return api_error(400, prefix + m, prefix + field_of(m));
  }
  auto compiled = compile_policy(parsed.policy);
  if (!compiled) return api_error(400, prefix + compiled.error().message, prefix + "spec.egress");
  out.summary = summary_json(parsed.policy, *compiled);
  out.name = parsed.policy.name;
  out.text = policy_json_text(parsed.policy);

  auto latest = store_.policy(p.workspace_id);
  if (!latest) return storage_error(latest.error());
  if (!selector) {
    if (latest->has_value()) {
      selector = nlohmann::json::parse((*latest)->selector, nullptr, false);
      if (selector->is_discarded()) selector = nlohmann::json{{"all", true}};
    } else {
      selector = nlohmann::json{{"all", true}};
    }
  }
  auto sel = parse_selector(*selector, "selector");
  if (auto* e = std::get_if<ApiError>(&sel)) return e->reply();
  out.selector = std::get<AgentSelector>(sel).to_json();
  out.same_as_latest = latest->has_value() && (*latest)->policy == out.text &&
                       nlohmann::json::parse((*latest)->selector, nullptr, false) == out.selector;
  if (latest->has_value()) out.latest_version = (*latest)->version;
  return out;
}

nlohmann::json policy_bundle_json(const PolicyBundle& b) {
  auto policy = nlohmann::json::parse(b.policy, nullptr, false);
  auto selector = nlohmann::json::parse(b.selector, nullptr, false);
  return {{"version", b.version},
          {"name", b.name},
          {"selector", selector.is_discarded() ? nlohmann::json::object() : selector},
          {"policy", policy.is_discarded() ? nlohmann::json::object() : policy},
          {"created_ms", b.created_ms},
          {"created_by", b.created_by}};
}

// Stores the bundle as a new version unless the newest is the same, in one
// transaction with its audit entry, then wakes every agent of the workspace
// (here and on the other replicas): each is told at once whether it is selected.
std::variant<PolicyBundle, HttpReply> ControlPlane::store_bundle(const StagedPolicy& s, const Principal& p,
                                                                 const std::string& action, bool& created) {
  created = false;
  if (s.same_as_latest) {
    auto latest = store_.policy(p.workspace_id);
    if (!latest) return storage_error(latest.error());
    if (latest->has_value()) return **latest;
  }
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto b = store_.insert_policy(p.workspace_id, s.name, s.text, s.selector.dump(), now_ms(), p.actor());
  if (!b) return storage_error(b.error());
  if (auto a = audit(p, action, "policy:" + std::to_string(b->version),
                     {{"name", s.name}, {"selector", s.selector}, {"sha256", sha256_hex(s.text)}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  created = true;
  wake_agent(p.workspace_id, kEveryAgent);
  return *b;
}

HttpReply ControlPlane::put_policy(const HttpRequest& req, const Principal& p) {
  auto staged = read_bundle(req, p);
  if (auto* r = std::get_if<HttpReply>(&staged)) return *r;
  const auto& s = std::get<StagedPolicy>(staged);
  if (s.dry_run) return ApiError{400, "dry_run", "is for POST /v1/policy/apply"}.reply();
  bool created = false;
  auto b = store_bundle(s, p, "policy.put", created);
  if (auto* r = std::get_if<HttpReply>(&b)) return *r;
  auto j = policy_bundle_json(std::get<PolicyBundle>(b));
  j["changed"] = created;
  return api_json(created ? 201 : 200, j);
}

HttpReply ControlPlane::get_policy(const HttpRequest& req, const Principal& p, bool as_file) {
  std::optional<int64_t> version;
  if (auto v = req.query_param("version")) {
    PathParams as_path{{"id", *v}};
    version = path_id(as_path);
    if (!version) return api_error(400, "version: must be a version number", "version");
  }
  auto b = store_.policy(p.workspace_id, version);
  if (!b) return storage_error(b.error());
  if (!b->has_value()) return api_error(404, version ? "no such policy version" : "no policy: PUT /v1/policy sets one");
  if (!as_file) return api_json(200, policy_bundle_json(**b));
  // The file as `faultctl policy export` prints it: PUT it back (or give it to
  // faultctl policy apply) and the same bundle results.
  auto parsed = policy_from_canonical_json((*b)->policy);
  if (!parsed) return api_error(500, "the stored policy does not read back: " + parsed.error().message);
  const auto format = req.query_param("format").value_or("json");
  if (format != "json" && format != "yaml") return api_error(400, "format: json or yaml", "format");
  HttpReply r = HttpReply::text(200, format == "yaml" ? policy_yaml_text(*parsed) : policy_json_text(*parsed));
  for (auto& [k, v] : r.headers)
    if (k == "Content-Type") v = format == "yaml" ? "application/yaml" : "application/json";
  r.headers.emplace_back("X-Faultline-Policy-Version", std::to_string((*b)->version));
  return r;
}

// {policy, selector, dry_run}: the same as PUT, answered with the agents that
// run it and the compiled summary; a dry run stores nothing and tells no one.
HttpReply ControlPlane::apply_policy_route(const HttpRequest& req, const Principal& p) {
  auto staged = read_bundle(req, p);
  if (auto* r = std::get_if<HttpReply>(&staged)) return *r;
  const auto& s = std::get<StagedPolicy>(staged);
  auto sel = parse_selector(s.selector, "selector");
  const auto& selector = std::get<AgentSelector>(sel);
  auto agents = store_.agents(p.workspace_id);
  if (!agents) return storage_error(agents.error());
  nlohmann::json selected = nlohmann::json::array(), left = nlohmann::json::array();
  for (const auto& a : *agents)
    (selector.matches(a) ? selected : left).push_back({{"id", a.id}, {"hostname", a.hostname}});
  nlohmann::json out{{"dry_run", s.dry_run}, {"name", s.name},       {"selector", s.selector},
                     {"agents", selected},   {"not_selected", left}, {"summary", s.summary}};
  if (s.dry_run) {
    out["changed"] = !s.same_as_latest;
    out["version"] = s.same_as_latest ? s.latest_version.value_or(0) : s.latest_version.value_or(0) + 1;
    return api_json(200, out);
  }
  bool created = false;
  auto b = store_bundle(s, p, "policy.apply", created);
  if (auto* r = std::get_if<HttpReply>(&b)) return *r;
  out["changed"] = created;
  out["version"] = std::get<PolicyBundle>(b).version;
  return api_json(created ? 201 : 200, out);
}

}  // namespace faultline::cp
