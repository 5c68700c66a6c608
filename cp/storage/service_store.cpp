// The orchestration's services (migration 7): one row per service, its spec
// as canonical JSON, the workspace in every WHERE.
#include "cp/storage/store.h"

namespace faultline::cp {
namespace {

// File-local names are unique in the library: it compiles as unity batches.
const char* kServiceColumns = " id, workspace_id, name, spec, created_ms, created_by ";

ServiceRow service_from(const SqlRow& r) {
  return ServiceRow{std::stoll(r[0].value_or("0")),
                    std::stoll(r[1].value_or("0")),
                    r[2].value_or(""),
                    r[3].value_or(""),
                    std::stoll(r[4].value_or("0")),
                    r[5].value_or("")};
}

}  // namespace

Result<ServiceRow> Store::insert_service(int64_t ws, const std::string& name, const std::string& spec, int64_t now_ms,
                                         const std::string& created_by) {
  auto taken = service_by_name(ws, name);
  if (!taken) return taken.error();
  if (*taken)
    return input_error(kConflict, "name: a service named " + name + " exists (id " + std::to_string((*taken)->id) +
                                      "); delete it first");
  auto r = db_->query(
      "INSERT INTO services (workspace_id, name, spec, created_ms, created_by) "
      "VALUES ($1, $2, $3, $4, $5) RETURNING" +
          std::string(kServiceColumns),
      {ws, name, spec, now_ms, created_by});
  if (!r) return r.error();
  return service_from(r->at(0));
}

Result<std::vector<ServiceRow>> Store::services(int64_t ws) {
  auto r =
      db_->query("SELECT" + std::string(kServiceColumns) + "FROM services WHERE workspace_id = $1 ORDER BY name", {ws});
  if (!r) return r.error();
  std::vector<ServiceRow> out;
  for (const auto& row : *r) out.push_back(service_from(row));
  return out;
}

Result<std::optional<ServiceRow>> Store::service(int64_t ws, int64_t id) {
  auto r = db_->query("SELECT" + std::string(kServiceColumns) + "FROM services WHERE workspace_id = $1 AND id = $2",
                      {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ServiceRow>();
  return std::optional<ServiceRow>(service_from(r->front()));
}

Result<std::optional<ServiceRow>> Store::service_by_name(int64_t ws, const std::string& name) {
  auto r = db_->query("SELECT" + std::string(kServiceColumns) + "FROM services WHERE workspace_id = $1 AND name = $2",
                      {ws, name});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ServiceRow>();
  return std::optional<ServiceRow>(service_from(r->front()));
}

Result<bool> Store::delete_service(int64_t ws, int64_t id) {
  auto r = db_->query("DELETE FROM services WHERE workspace_id = $1 AND id = $2 RETURNING id", {ws, id});
  if (!r) return r.error();
  return !r->empty();
}

}  // namespace faultline::cp
