// "Always allow" for --approve-dangerous: a command line a person let run
// once and for the rest of the session. A grant names the exact words judged
// (the path run, then argv[1...]), never a rule: `rm -rf /tmp/build` granted
// lets that command run again, not every `rm -rf`. Revoked one by one or all
// at once (faultctl approvals revoke ID|all); gone when the guard ends.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace faultline {

struct ExecGrant {
  std::string id;       // "<guard pid>.g<n>"
  std::string command;  // the judged words, space-joined
  std::string rule;     // the rule it was held under, for people
  std::chrono::system_clock::time_point created;
};

class ExecGrants {
 public:
  // id_prefix starts every id ("4123" -> "4123.g1"), like the approval queue's.
  explicit ExecGrants(std::string id_prefix) : prefix_(std::move(id_prefix)) {}

  // Grants `command`; granting it again returns the grant it has.
  std::string add(const std::string& command, const std::string& rule);
  // The grant that lets `command` run, if any.
  [[nodiscard]] std::optional<ExecGrant> find(const std::string& command) const;
  // Oldest first.
  [[nodiscard]] std::vector<ExecGrant> list() const;
  // False when no grant has that id.
  bool revoke(const std::string& id);
  // How many there were.
  size_t revoke_all();

 private:
  const std::string prefix_;
  mutable std::mutex mu_;
  uint64_t next_ = 0;
  std::vector<ExecGrant> grants_;  // few: a person made each one
};

}  // namespace faultline
