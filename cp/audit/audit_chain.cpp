// Hashing and checking the activity log's chain.
#include "cp/audit/audit_chain.h"

#include "cp/auth/crypto.h"

namespace faultline::cp {
namespace {

void field(std::string& out, std::string_view v) {
  out += std::to_string(v.size());
  out += ':';
  out += v;
  out += ';';
}

}  // namespace

std::string audit_entry_hash(const AuditEntry& e) {
  std::string canon = "faultcp-audit-v1;";
  field(canon, std::to_string(e.workspace_id));
  field(canon, std::to_string(e.at_ms));
  field(canon, e.actor);
  field(canon, e.action);
  field(canon, e.object);
  field(canon, e.detail);
  field(canon, e.prev_hash);
  return sha256_hex(canon);
}

ChainCheck verify_audit_chain(const std::vector<AuditEntry>& entries) {
  ChainCheck c;
  std::string prev = kAuditGenesis;
  for (const auto& e : entries) {
    ++c.entries;
    if (e.prev_hash != prev) {
      c.ok = false;
      c.bad_seq = e.seq;
      c.reason = "prev_hash does not match the entry before it (an entry was removed, inserted or edited)";
      return c;
    }
    if (audit_entry_hash(e) != e.hash) {
      c.ok = false;
      c.bad_seq = e.seq;
      c.reason = "the entry's hash does not match its fields (the entry was edited)";
      return c;
    }
    prev = e.hash;
  }
  c.head = prev;
  return c;
}

}  // namespace faultline::cp
