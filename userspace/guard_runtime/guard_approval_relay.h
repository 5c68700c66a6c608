// A guard's held requests through faultcp too: each is posted to
// /v1/guardrails/approvals and its decision long-polled, so a person can
// decide it in the dashboard or the API as well as with `faultctl approvals`.
// The first decision wins; the other side's copy is withdrawn.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "userspace/guard/approval_queue.h"
#include "userspace/guard_runtime/cp_link.h"

namespace faultline {

class GuardApprovalRelay final : public ApprovalListener {
 public:
  using Log = std::function<void(const std::string&)>;
  // queue: where faultcp's decisions are applied (it outlives the relay's
  // threads: stop() is called before the queue goes).
  GuardApprovalRelay(std::shared_ptr<const CpLink> link, ApprovalQueue& queue, Log log);
  ~GuardApprovalRelay() override;

  // Each held request gets a thread of its own: post, then long-poll its
  // decision, until one side decides, the deadline, or stop().
  void held(const PendingApproval& p) override;
  // A local ending (a person with faultctl approvals, the timeout, the client
  // gone): the faultcp copy is withdrawn (DELETE) unless faultcp decided it.
  void settled(const PendingApproval& p, ApprovalOutcome outcome) override;
  // Withdraws every copy still pending at faultcp (within a few seconds) and
  // joins the threads; later calls do nothing.
  void stop();

 private:
  struct Hold {
    PendingApproval pending;
    UniqueFd wake;                     // an eventfd: readable once settled locally or stopping
    std::atomic<bool> settled{false};  // the local queue settled it
    std::atomic<bool> by_cp{false};    // ... because faultcp decided it
    std::atomic<bool> done{false};     // its thread has returned
    std::thread thread;
  };
  void follow(const std::shared_ptr<Hold>& h);
  void reap_locked();

  std::shared_ptr<const CpLink> link_;
  ApprovalQueue& queue_;
  Log log_;
  std::mutex mu_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<Hold>> holds_;  // by local id
  std::set<std::string> settled_early_;                 // settled before held() was told
};

}  // namespace faultline
