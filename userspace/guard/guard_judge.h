// The guard as the proxy's RequestJudge: each request head becomes facts, the
// policy decides, and the verdict is forwarded, answered (a final denial) or
// held for approval; every decision is one activity line.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "userspace/guard/activity_log.h"
#include "userspace/guard/approval_queue.h"
#include "userspace/guard/guard_answer.h"
#include "userspace/guard/guard_policy.h"
#include "userspace/proxy/request_judge.h"

namespace faultline {

struct GuardJudgeOptions {
  std::string identity;  // the activity log's and the approvals' identity
  // The proxy terminates CONNECT tunnels: their inner requests are judged with
  // the full path, so the tunnel itself (CONNECT, SNI) is let through unjudged.
  bool terminate_tls = false;
  std::chrono::milliseconds approve_timeout{120'000};
  std::string approval_prefix;               // starts every approval id (the guard's pid)
  std::shared_ptr<ActivityWriter> activity;  // may be null: no activity log
  // One line per decision for people (stderr); may be empty. Called on a
  // worker thread: it must be quick.
  std::function<void(const std::string&)> log;
};

// What the guard did, for its summary at exit.
struct GuardCounts {
  uint64_t requests = 0;    // decisions made (tunnels counted once)
  uint64_t allowed = 0;     // forwarded at once (monitor: whatever the verdict)
  uint64_t denied = 0;      // answered with a denial (enforce), at once or after a hold
  uint64_t held = 0;        // held for approval (enforce)
  uint64_t approved = 0;    // held, then approved
  uint64_t would_deny = 0;  // monitor: what enforce would have denied
  uint64_t would_hold = 0;  // monitor: what enforce would have held
};

class GuardJudge final : public RequestJudge {
 public:
  GuardJudge(std::shared_ptr<const GuardPolicy> policy, GuardJudgeOptions options);

  // Swaps the policy: a request is judged by the version it loaded at its
  // start, never by a mix. Held requests keep the verdict they were held under.
  void reload(std::shared_ptr<const GuardPolicy> policy);
  [[nodiscard]] std::shared_ptr<const GuardPolicy> policy() const { return policy_.load(); }
  [[nodiscard]] ApprovalQueue& approvals() { return approvals_; }
  [[nodiscard]] GuardCounts counts() const;

  [[nodiscard]] RequestVerdict judge(const RequestHead& head, HeldRequest later) override;
  void withdrawn(uint64_t request_id) override;

 private:
  // The activity line and the log line of one decision.
  void record(const RequestHead& head, GuardVerdict verdict, const std::string& rule, const std::string& what);

  std::atomic<std::shared_ptr<const GuardPolicy>> policy_;
  GuardJudgeOptions options_;
  ApprovalQueue approvals_;
  std::atomic<uint64_t> requests_{0}, allowed_{0}, denied_{0}, held_{0}, approved_{0}, would_deny_{0},
      would_hold_{0};
  // A tunnel's CONNECT host by the client's address, so that its SNI is judged
  // again only when it names another host (one tunnel, one decision).
  std::mutex tunnels_mu_;
  std::map<std::string, std::string> tunnel_hosts_;
};

// The facts the policy decides on, from a head.
[[nodiscard]] RequestFacts request_facts(const RequestHead& head);

// Whose error format a denial takes: a model provider's (a known model host,
// or a model API path such as /v1/messages or /v1/chat/completions), else plain.
[[nodiscard]] DenialFormat denial_format_for_request(std::string_view host, std::string_view path,
                                                     bool has_anthropic_version);

}  // namespace faultline
