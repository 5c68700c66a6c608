// faultd's side of the control plane (faultcp): enroll once, long-poll
// GET /v1/agents/{id}/next for work, run each dispatched experiment through the
// same guarded run as `faultctl run`, report progress and the final record as
// events, stop at once when told (an abort, the kill switch), and reconcile
// after a restart of either side.
//
// At most once: an experiment is written to the state file as claimed before
// faultd reports "running", and only then started; a faultd that comes back
// finds it there and never starts it again: it ends the fault if one is still
// on and reports the experiment failed. A final report is written to the state
// file before it is sent and kept until faultcp took it (or refused it for
// good), so a faultcp that was down when a run ended learns its end when it is
// back. A policy version it is given is applied (or removed) and reported
// before it polls again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/daemon/agent_state.h"
#include "userspace/daemon/remote_experiment.h"
#include "userspace/guardrails/http_client.h"

namespace faultline {

struct AgentSettings {
  std::string control_plane;                  // http(s)://host[:port][/prefix]
  std::string enroll_token;                   // flcp_enr_...: needed until this faultd has registered
  std::string ca_file;                        // --control-plane-ca: the one CA trusted for https
  std::string state_path;                     // the state file (default <state dir>/cp-agent.json)
  std::string version;                        // faultd's version, reported at registration
  std::map<std::string, std::string> labels;  // --label, sent at registration
};

// <state dir>/cp-agent.json.
[[nodiscard]] std::string default_agent_state_path();

class ControlPlaneAgent {
 public:
  using Log = std::function<void(const std::string&)>;

  // Reads the state file and reconciles what a previous faultd left (faults
  // ended, reports queued); then polls and reports on threads of its own.
  // Bad input (a URL, a CA file, no token to enroll with) is said here.
  [[nodiscard]] static Result<std::unique_ptr<ControlPlaneAgent>> start(AgentSettings s, Log log);
  ~ControlPlaneAgent();
  ControlPlaneAgent(const ControlPlaneAgent&) = delete;
  ControlPlaneAgent& operator=(const ControlPlaneAgent&) = delete;

  // Ends every running experiment's fault, reports what it can within a few
  // seconds (the rest stays queued in the state file), and joins.
  void stop();

 private:
  ControlPlaneAgent(AgentSettings s, HttpUrl base, HttpClient client, Log log);
  void reconcile();
  void poll_loop();
  void report_loop();
  [[nodiscard]] Status enroll();
  void handle(const nlohmann::json& answer);
  void begin(const nlohmann::json& experiment);
  // A policy version from faultcp ({version, selected, text}): applied with
  // apply_policy (atomic; the same file again is a no-op), or the one applied
  // before removed when the version leaves this agent out; then reported. A
  // failure leaves the live policy as it was and is reported with the reason.
  void take_policy(const nlohmann::json& policy);
  void end_run(int64_t id, const RemoteEnding& e);
  void queue_report(AgentReport r);          // under mu_
  void save();                               // under mu_
  [[nodiscard]] bool sleep_ms(uint64_t ms);  // false once stopping
  // One call to faultcp with the agent's (or the given) bearer token.
  [[nodiscard]] Result<HttpAnswer> send(const std::string& method, const std::string& path, const std::string& token,
                                        const std::string& body, uint64_t timeout_ms) const;

  AgentSettings s_;
  HttpUrl base_;
  HttpClient client_;
  Log log_;
  UniqueFd stop_fd_;  // an eventfd: readable once stopping (cancels the long poll)
  std::atomic<bool> stopping_{false};
  std::atomic<bool> runs_over_{false};  // stopping, and every run has queued its report

  std::mutex mu_;
  std::condition_variable changed_;
  AgentState state_;
  std::map<int64_t, std::unique_ptr<RemoteExperiment>> active_;
  std::map<int64_t, nlohmann::json> progress_;  // the latest progress line per run, not yet sent
  std::string last_error_;                      // logged once until it changes

  std::thread poller_, reporter_;
};

}  // namespace faultline
