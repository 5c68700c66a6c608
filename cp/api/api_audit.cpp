// The activity log: export with its chain head, verification, CSV.
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"

namespace faultline::cp {
namespace {

std::string csv_cell(const std::string& s) {
  // Quoted when needed; a leading =, +, - or @ is prefixed with ' so that a
  // spreadsheet does not run it as a formula.
  std::string v = s;
  if (!v.empty() && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@')) v.insert(0, "'");
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::optional<AuditEntry> entry_from_json(const nlohmann::json& j) {
  try {
    return AuditEntry{j.at("seq").get<int64_t>(),        0,
                      j.at("at_ms").get<int64_t>(),      j.at("actor").get<std::string>(),
                      j.at("action").get<std::string>(), j.at("object").get<std::string>(),
                      j.at("detail").get<std::string>(), j.at("prev_hash").get<std::string>(),
                      j.at("hash").get<std::string>()};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

nlohmann::json check_json(const ChainCheck& c) {
  nlohmann::json j{{"ok", c.ok}, {"entries", c.entries}};
  if (c.ok) j["head"] = c.head;
  if (c.bad_seq) j["bad_seq"] = *c.bad_seq;
  if (!c.reason.empty()) j["reason"] = c.reason;
  return j;
}

}  // namespace

HttpReply ControlPlane::audit_export(const Principal& p) {
  auto entries = store_.audit(p.workspace_id);
  if (!entries) return api_error(500, "storage: " + entries.error().describe());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : *entries) list.push_back(audit_entry_json(e));
  const std::string head = entries->empty() ? kAuditGenesis : entries->back().hash;
  return api_json(200, {{"format", "faultcp-audit-v1"},
                        {"workspace_id", p.workspace_id},
                        {"exported_ms", now_ms()},
                        {"head", head},
                        {"entries", list}});
}

// No body (or {}): the stored chain. {"bundle": <an export>}: that bundle,
// whose head must be its last entry's hash. An exported bundle keeps
// verifying after the database changes, so a copy kept elsewhere anchors the
// chain: a row removed from the end shows as a head the database lacks.
HttpReply ControlPlane::audit_verify(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body, true);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, {{"bundle", JsonType::Object}})) return e->reply();
  if (!j.contains("bundle")) {
    auto entries = store_.audit(p.workspace_id);
    if (!entries) return api_error(500, "storage: " + entries.error().describe());
    auto check = verify_audit_chain(*entries);
    return api_json(200, check_json(check));
  }
  const auto& bundle = j["bundle"];
  if (!bundle.contains("entries") || !bundle["entries"].is_array())
    return ApiError{400, "bundle.entries", "must be an array"}.reply();
  if (!bundle.contains("head") || !bundle["head"].is_string())
    return ApiError{400, "bundle.head", "must be a string"}.reply();
  if (!bundle.contains("workspace_id") || !bundle["workspace_id"].is_number_integer())
    return ApiError{400, "bundle.workspace_id", "must be an integer"}.reply();
  std::vector<AuditEntry> entries;
  size_t i = 0;
  for (const auto& e : bundle["entries"]) {
    auto entry = entry_from_json(e);
    if (!entry) return ApiError{400, "bundle.entries[" + std::to_string(i) + "]", "not an audit entry"}.reply();
    entry->workspace_id = bundle["workspace_id"].get<int64_t>();
    entries.push_back(*entry);
    ++i;
  }
  auto check = verify_audit_chain(entries);
  if (check.ok && check.head != bundle["head"].get<std::string>()) {
    check.ok = false;
    check.reason = "the bundle's head is not its last entry's hash (entries were removed from the end)";
  }
  return api_json(200, check_json(check));
}

HttpReply ControlPlane::audit_csv(const Principal& p) {
  auto entries = store_.audit(p.workspace_id);
  if (!entries) return api_error(500, "storage: " + entries.error().describe());
  std::string out = "seq,at_ms,actor,action,object,detail,prev_hash,hash\r\n";
  for (const auto& e : *entries)
    out += std::to_string(e.seq) + "," + std::to_string(e.at_ms) + "," + csv_cell(e.actor) + "," + csv_cell(e.action) +
           "," + csv_cell(e.object) + "," + csv_cell(e.detail) + "," + e.prev_hash + "," + e.hash + "\r\n";
  HttpReply r{
      200,
      {{"Content-Type", "text/csv; charset=utf-8"}, {"Content-Disposition", "attachment; filename=\"audit.csv\""}},
      std::move(out)};
  return r;
}

}  // namespace faultline::cp
