// The workspace's guard section from faultcp as the guard's policy: read once
// at start, then long-polled (since_version, wait 30 s) on a thread of its own
// and swapped into the judge atomically; the last one is cached in the state
// folder for a start while faultcp is unreachable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/guard/guard_judge.h"
#include "userspace/guard_runtime/cp_link.h"

namespace faultline {

// A version of the workspace's section: 0 when none was ever put.
struct WorkspaceGuardPolicy {
  uint64_t version = 0;
  std::optional<GuardPolicy> policy;  // none: no section put yet
  std::string from;                   // "faultcp" or the cache file's path
};

// The section at start: faultcp's newest, else (faultcp unreachable) the
// cache; bad input when the section cannot run with these flags (a path rule
// without --terminate-tls), an error when neither faultcp nor a cache answers.
[[nodiscard]] Result<WorkspaceGuardPolicy> fetch_workspace_guard_policy(const CpLink& link,
                                                                        const std::string& cache_path,
                                                                        bool terminate_tls);

class GuardPolicySync {
 public:
  using Log = std::function<void(const std::string&)>;
  // Follows the versions after `since`, reloading judge with each that can run.
  GuardPolicySync(std::shared_ptr<const CpLink> link, std::shared_ptr<GuardJudge> judge, uint64_t since,
                  std::string cache_path, bool terminate_tls, Log log);
  ~GuardPolicySync();  // ends the poll at once
  GuardPolicySync(const GuardPolicySync&) = delete;
  GuardPolicySync& operator=(const GuardPolicySync&) = delete;

 private:
  void run();
  std::shared_ptr<const CpLink> link_;
  std::shared_ptr<GuardJudge> judge_;
  uint64_t version_;
  std::string cache_path_;
  bool terminate_tls_;
  Log log_;
  UniqueFd stop_;  // an eventfd: readable once stopping
  std::thread thread_;
};

}  // namespace faultline
