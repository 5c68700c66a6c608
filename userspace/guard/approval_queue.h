// The guard's approvals: requests held until a person decides, the timeout
// denies, or their client goes away; one timer thread for every deadline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"

namespace faultline {

// What a hold stands for: a proxied request, whose client can go away
// (withdraw), or a command's execve, which waits in the kernel and cannot.
enum class ApprovalSubject : uint8_t { Request, Exec };

// One held request as `faultctl approvals list` shows it.
struct PendingApproval {
  std::string id;  // "<guard pid>.<n>": names the guard too, so any guard's client finds it
  ApprovalSubject subject = ApprovalSubject::Request;
  uint64_t request_id = 0;  // the proxy's RequestHead::id (Request only)
  std::string denial_id;    // the request_id its denial would carry ("req_<pid>_<n>"): faultcp's key
  std::string identity;
  std::string method;
  std::string host;  // with ":port"
  std::string path;
  std::string rule;
  std::string reason;
  std::chrono::system_clock::time_point created;
  std::chrono::system_clock::time_point deadline;
};

enum class ApprovalOutcome : uint8_t { Approved, Denied, TimedOut, Withdrawn };

// How a held request ends; called once, outside the queue's lock, on the
// thread that settled it (a decision's, the timer's, a withdrawal's).
using ApprovalSettle = std::function<void(ApprovalOutcome, const std::string& reason)>;

// Told of every hold and every ending, outside the queue's lock, after the
// request's own settle ran: how a second decision path (faultcp) follows the
// local queue. settled comes once per held, on the settling thread.
class ApprovalListener {
 public:
  virtual ~ApprovalListener() = default;
  virtual void held(const PendingApproval& p) = 0;
  virtual void settled(const PendingApproval& p, ApprovalOutcome outcome) = 0;
};

class ApprovalQueue {
 public:
  // id_prefix starts every id ("4123" -> "4123.1"); timeout is --approve-timeout.
  ApprovalQueue(std::string id_prefix, std::chrono::milliseconds timeout);
  ~ApprovalQueue();  // stops the timer; what is still held is settled TimedOut
  ApprovalQueue(const ApprovalQueue&) = delete;
  ApprovalQueue& operator=(const ApprovalQueue&) = delete;

  // Holds a request (id, created and deadline are filled); returns its id.
  [[nodiscard]] std::string add(PendingApproval pending, ApprovalSettle settle);
  // Every held request, oldest first.
  [[nodiscard]] std::vector<PendingApproval> list() const;
  // A person's decision. ENOENT (bad input) when no request of that id is held.
  [[nodiscard]] Result<PendingApproval> decide(const std::string& id, bool approve, const std::string& reason);
  // The client of a held request went away: dropped without a verdict.
  // Names a proxied request only; an exec hold is never withdrawn.
  bool withdraw(uint64_t request_id);
  [[nodiscard]] std::chrono::milliseconds timeout() const { return timeout_; }
  // Set before the first add(); may be null.
  void set_listener(std::shared_ptr<ApprovalListener> listener) { listener_ = std::move(listener); }

 private:
  struct Entry {
    PendingApproval pending;
    ApprovalSettle settle;
  };
  void run_timer();
  void settle(Entry& e, ApprovalOutcome o, const std::string& reason);
  // Removes one entry under the lock; the caller settles it after unlocking.
  [[nodiscard]] std::optional<Entry> take_locked(const std::string& id);

  const std::string prefix_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t next_ = 0;
  std::map<std::string, Entry> held_;  // by id
  std::shared_ptr<ApprovalListener> listener_;
  std::thread timer_;
};

}  // namespace faultline
