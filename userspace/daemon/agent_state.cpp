// The agent's state file: JSON, mode 0600, fsynced and renamed into place.
#include "userspace/daemon/agent_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"

namespace faultline {

nlohmann::json AgentState::to_json() const {
  nlohmann::json j{{"control_plane", control_plane}, {"agent_id", agent_id}, {"token", token}};
  if (policy_version != 0) j["policy_version"] = policy_version;
  j["runs"] = nlohmann::json::object();
  for (const auto& [id, r] : runs)
    j["runs"][std::to_string(id)] = {{"phase", r.phase}, {"fault_id", r.fault_id}, {"owner_pid", r.owner_pid}};
  j["outbox"] = nlohmann::json::array();
  for (const auto& o : outbox)
    j["outbox"].push_back(
        {{"experiment_id", o.experiment_id}, {"type", o.type}, {"detail", o.detail}, {"record", o.record}});
  return j;
}

Result<AgentState> load_agent_state(const std::string& path) {
  AgentState s;
  if (::access(path.c_str(), F_OK) != 0) return s;
  auto text = read_text_file(path);
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  auto bad = [&](const std::string& why) {
    return make_error(EINVAL, "the control-plane agent state " + path + " " + why + "; move it away to enroll anew");
  };
  if (j.is_discarded() || !j.is_object()) return bad("is not a JSON object");
  try {
    s.control_plane = j.at("control_plane").get<std::string>();
    s.agent_id = j.at("agent_id").get<int64_t>();
    s.token = j.at("token").get<std::string>();
    s.policy_version = j.value("policy_version", int64_t{0});
    const nlohmann::json runs = j.value("runs", nlohmann::json::object());
    const nlohmann::json outbox = j.value("outbox", nlohmann::json::array());
    for (const auto& [id, r] : runs.items())
      s.runs[std::stoll(id)] =
          AgentRun{r.at("phase").get<std::string>(), r.value("fault_id", ""), r.value("owner_pid", 0u)};
    for (const auto& o : outbox)
      s.outbox.push_back(AgentReport{o.at("experiment_id").get<int64_t>(), o.at("type").get<std::string>(),
                                     o.value("detail", ""), o.value("record", nlohmann::json::object())});
    for (auto& o : s.outbox)
      if (o.record.is_null()) o.record = nlohmann::json::object();
  } catch (const std::exception& e) {
    return bad(std::string("is not one this faultd wrote (") + e.what() + ")");
  }
  return s;
}

Status save_agent_state(const std::string& path, const AgentState& s) {
  FL_TRY(write_file_atomic(path, s.to_json().dump() + "\n"));
  if (::chmod(path.c_str(), 0600) != 0) return errno_error("chmod " + path);
  return {};
}

}  // namespace faultline
