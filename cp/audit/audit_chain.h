// The activity log as a hash chain: each entry carries the SHA-256 of the one
// before it in its workspace, and its own hash covers every field and that
// link, so an edited, inserted or deleted row breaks the chain from there on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace faultline::cp {

struct AuditEntry {
  int64_t seq = 0;  // global order; a workspace's chain is its entries by seq
  int64_t workspace_id = 0;
  int64_t at_ms = 0;
  std::string actor;   // "user:3", "token:7", "agent:4", "anonymous"
  std::string action;  // "experiment.create", "kill.engage", ...
  std::string object;  // "experiment:12", "" when none
  std::string detail;  // a JSON object as text
  std::string prev_hash;
  std::string hash;
};

// The hash of the first entry's predecessor.
inline constexpr const char* kAuditGenesis = "0000000000000000000000000000000000000000000000000000000000000000";

// SHA-256 over the entry's fields and prev_hash, length-prefixed so no two
// different entries serialise alike. seq is not covered: a chain exported from
// one database verifies in another.
[[nodiscard]] std::string audit_entry_hash(const AuditEntry& e);

struct ChainCheck {
  bool ok = true;
  std::optional<int64_t> bad_seq;  // the first entry that does not verify
  std::string reason;
  std::string head;  // the last entry's hash (genesis when empty)
  size_t entries = 0;
};
// Entries of one workspace in seq order.
[[nodiscard]] ChainCheck verify_audit_chain(const std::vector<AuditEntry>& entries);

}  // namespace faultline::cp
