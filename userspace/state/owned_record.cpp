#include "userspace/state/owned_record.h"

#include <nlohmann/json.hpp>

namespace faultline {

nlohmann::json identity_to_json(const ProcessIdentity& id) { return {{"pid", id.pid}, {"start", id.start}}; }

ProcessIdentity identity_from_json(const nlohmann::json& j) {
  ProcessIdentity id;
  if (j.is_object()) {
    id.pid = j.value("pid", 0);
    id.start = j.value("start", uint64_t{0});
  }
  return id;
}

void OwnedRecord::write_core(nlohmann::json& j) const {
  j["id"] = id;
  j["kind"] = kind;
  j["summary"] = summary;
  j["boot_id"] = boot_id;
  j["owner"] = identity_to_json(owner);
  j["expires_ns"] = expires_ns;
  j["created_wall"] = created_wall;
}

void OwnedRecord::read_core(const nlohmann::json& j) {
  id = j.at("id").get<std::string>();
  kind = j.value("kind", "");
  summary = j.value("summary", "");
  boot_id = j.value("boot_id", "");
  owner = identity_from_json(j.value("owner", nlohmann::json::object()));
  expires_ns = j.value("expires_ns", uint64_t{0});
  created_wall = j.value("created_wall", 0.0);
}

}  // namespace faultline
