// Durable state of resource faults under /run/faultline, and the one way to undo them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/state/owned_record.h"

namespace faultline {

// What a resource fault is, who owns and guards it, and how to undo it. The undo
// list is written ahead: an action is recorded before the change it undoes is made,
// so whoever reverts (owner, reaper, `faultctl abort`, the next faultctl after a
// crash) finds everything that may have been done.
// The core (id "r7", never reused, so a stale ID never hits a newer fault;
// kind; summary; owner; expires_ns on CLOCK_BOOTTIME) is OwnedRecord's.
struct ResourceFaultState : OwnedRecord {
  // Random, and part of every name the fault creates (balloon file, cgroup): two
  // state folders (FAULTLINE_RUN_DIR) both have an r1, and an undo recorded ahead of
  // a create that then failed must never match what another fault made.
  std::string token;
  nlohmann::json spec;  // as asked
  nlohmann::json plan;  // as resolved (targets, cores, cgroup, balloon path)
  ProcessIdentity reaper;
  std::string phase = "applying";  // applying | active | revert-failed
  uint64_t grace_ns = 0;
  std::string record_dir;
  std::vector<nlohmann::json> undo;  // in the order the changes were made
  std::string error;                 // the last revert failure

  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] static Result<ResourceFaultState> from_json(const nlohmann::json& j);
  // "r7-1f2e3d4c5b6a": what created names carry.
  [[nodiscard]] std::string unique_name() const { return token.empty() ? id : id + "-" + token; }
};

// 12 random hex digits (getrandom).
[[nodiscard]] std::string random_token();

// An exclusive lock on one fault. Whoever holds it may change the fault; the
// owner holds it for the whole apply so that an abort cannot slip in between an
// undo record and its change.
class FaultLock {
 public:
  FaultLock(FaultLock&&) noexcept = default;
  FaultLock& operator=(FaultLock&&) noexcept = default;
  ~FaultLock();

 private:
  friend class ResourceFaultStore;
  FaultLock(UniqueFd fd, std::string lock_path, std::string state_path)
      : fd_(std::move(fd)), lock_path_(std::move(lock_path)), state_path_(std::move(state_path)) {}
  UniqueFd fd_;
  std::string lock_path_;
  std::string state_path_;
};

class ResourceFaultStore {
 public:
  // FAULTLINE_RUN_DIR, else /run/faultline. create makes the folders (mode 0700);
  // without it a missing folder is ENOENT. A folder that another user owns or can
  // write is refused: its files tell root what to kill and delete.
  [[nodiscard]] static Result<ResourceFaultStore> open(bool create);
  [[nodiscard]] static std::string default_root();

  [[nodiscard]] const std::string& root() const { return root_; }
  [[nodiscard]] std::string faults_dir() const { return root_ + "/faults"; }
  [[nodiscard]] std::string state_path(const std::string& id) const { return faults_dir() + "/" + id + ".json"; }

  [[nodiscard]] Result<std::string> allocate_id() const;
  [[nodiscard]] Result<FaultLock> lock(const std::string& id) const;
  [[nodiscard]] Result<ResourceFaultState> read(const std::string& id) const;  // ENOENT once gone
  [[nodiscard]] std::vector<ResourceFaultState> list() const;                  // by ID
  [[nodiscard]] Status write(const ResourceFaultState& st) const;              // atomic; hold the lock
  [[nodiscard]] Status remove(const std::string& id) const;

 private:
  explicit ResourceFaultStore(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

// Records undo actions ahead of the changes they undo. The caller holds the lock.
class UndoJournal {
 public:
  UndoJournal(const ResourceFaultStore& store, ResourceFaultState& state) : store_(store), state_(state) {}
  [[nodiscard]] Status record(nlohmann::json action);
  [[nodiscard]] Status amend_last(nlohmann::json action);
  [[nodiscard]] const ResourceFaultState& state() const { return state_; }

 private:
  const ResourceFaultStore& store_;
  ResourceFaultState& state_;
};

// The undo actions, built here so that every writer spells them the same way.
namespace undo {
[[nodiscard]] nlohmann::json resume(const ProcessIdentity& p);       // SIGCONT a process we stopped
[[nodiscard]] nlohmann::json thaw(const std::string& cgroup_dir);    // cgroup.freeze = 0
[[nodiscard]] nlohmann::json kill(const ProcessIdentity& p);         // SIGKILL a worker
[[nodiscard]] nlohmann::json remove_cgroup(const std::string& dir);  // kill members, rmdir
[[nodiscard]] nlohmann::json unlink(const std::string& path, uint64_t dev, uint64_t ino);
}  // namespace undo

// Undoes one action. Idempotent; a process is touched only if it is the recorded one.
[[nodiscard]] Status undo_action(const nlohmann::json& action);

// Takes the fault's lock, undoes every action newest first and drops the state.
// false: the fault was already gone (someone else reverted it). On a failed undo
// the state stays, marked revert-failed, for the next faultctl to retry.
[[nodiscard]] Result<bool> revert_fault(const ResourceFaultStore& store, const std::string& id, const std::string& why);

// The grace period the reaper gives the owner after expiry: 5s, or
// FAULTLINE_REAPER_GRACE (1s-60s).
[[nodiscard]] uint64_t reaper_grace_ns();

}  // namespace faultline
