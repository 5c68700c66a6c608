// What faultd keeps of its control-plane enrollment, in one root-only file
// (default <state dir>/cp-agent.json, mode 0600, replaced atomically): the
// agent id and token, each dispatched experiment it claimed and how far it got,
// and the final reports not yet delivered. Written before every step that
// matters, so that a faultd killed at any point neither runs an experiment
// twice nor loses how one ended.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

struct AgentRun {
  // claimed: written before "running" is reported; never started again.
  // running: the fault may be on (fault_id once applied).
  std::string phase;
  std::string fault_id;
  // The faultd that claimed it: its packet fault carries this owner pid, which
  // finds the fault should faultd die between applying it and writing fault_id.
  uint32_t owner_pid = 0;
};

struct AgentReport {  // a final event waiting for the control plane
  int64_t experiment_id = 0;
  std::string type;
  std::string detail;
  nlohmann::json record = nlohmann::json::object();
};

struct AgentState {
  std::string control_plane;  // the base URL it registered with
  int64_t agent_id = 0;       // 0: not registered
  std::string token;          // flcp_agent_...
  std::map<int64_t, AgentRun> runs;
  std::vector<AgentReport> outbox;
  // The control plane's policy version this faultd applied and left live (0:
  // none): reported as what it runs, and removed when a version leaves it out.
  int64_t policy_version = 0;

  [[nodiscard]] nlohmann::json to_json() const;
};

// The file, or an empty state when there is none; a file that cannot be read
// as one is an error naming it (never silently replaced: it holds a token).
[[nodiscard]] Result<AgentState> load_agent_state(const std::string& path);
[[nodiscard]] Status save_agent_state(const std::string& path, const AgentState& s);

}  // namespace faultline
