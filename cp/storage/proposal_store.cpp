// The proposer's runs (migration 9): every run one row, the workspace in
// every WHERE; a waiting proposal is decided once (the UPDATE's WHERE state).
#include "cp/storage/store.h"

namespace faultline::cp {
namespace {

// File-local names are unique in the library: it compiles as unity batches.
const char* kProposalColumns =
    " id, workspace_id, service, mode, state, code, run, created_ms, created_by, decided_ms, decided_by, "
    "decision_reason, experiment_id ";

std::optional<int64_t> proposal_int(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return std::stoll(*v);
}

ProposalRow proposal_from(const SqlRow& r) {
  return ProposalRow{std::stoll(r[0].value_or("0")),
                     std::stoll(r[1].value_or("0")),
                     r[2].value_or(""),
                     r[3].value_or(""),
                     r[4].value_or(""),
                     r[5].value_or(""),
                     r[6].value_or(""),
                     std::stoll(r[7].value_or("0")),
                     r[8].value_or(""),
                     proposal_int(r[9]),
                     r[10],
                     r[11],
                     proposal_int(r[12])};
}

}  // namespace

Result<ProposalRow> Store::insert_proposal(int64_t ws, const std::string& service, const std::string& mode,
                                           const std::string& state, const std::string& code, const std::string& run,
                                           int64_t now_ms, const std::string& by) {
  auto r = db_->query(
      "INSERT INTO proposals (workspace_id, service, mode, state, code, run, created_ms, created_by) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING" +
          std::string(kProposalColumns),
      {ws, service, mode, state, code, run, now_ms, by});
  if (!r) return r.error();
  return proposal_from(r->at(0));
}

Result<std::vector<ProposalRow>> Store::proposals(int64_t ws, int64_t limit) {
  auto r = db_->query(
      "SELECT" + std::string(kProposalColumns) + "FROM proposals WHERE workspace_id = $1 ORDER BY id DESC LIMIT $2",
      {ws, limit});
  if (!r) return r.error();
  std::vector<ProposalRow> out;
  for (const auto& row : *r) out.push_back(proposal_from(row));
  return out;
}

Result<std::optional<ProposalRow>> Store::proposal(int64_t ws, int64_t id) {
  auto r = db_->query("SELECT" + std::string(kProposalColumns) + "FROM proposals WHERE workspace_id = $1 AND id = $2",
                      {ws, id});
  if (!r) return r.error();
  if (r->empty()) return std::optional<ProposalRow>();
  return std::optional<ProposalRow>(proposal_from(r->front()));
}

Result<bool> Store::decide_proposal(int64_t ws, int64_t id, const std::string& state, int64_t now_ms,
                                    const std::string& by, const std::string& reason,
                                    std::optional<int64_t> experiment_id) {
  const SqlValue exp = experiment_id ? SqlValue(*experiment_id) : SqlValue(std::monostate{});
  auto r = db_->query(
      "UPDATE proposals SET state = $3, decided_ms = $4, decided_by = $5, decision_reason = $6, experiment_id = $7 "
      "WHERE workspace_id = $1 AND id = $2 AND state = 'awaiting_approval' RETURNING id",
      {ws, id, state, now_ms, by, reason, exp});
  if (!r) return r.error();
  return !r->empty();
}

}  // namespace faultline::cp
