// One sender thread: wait for lines, send the oldest batch as NDJSON, drop what
// faultcp confirms (stored_through), back off while it does not answer.
#include "userspace/guard_runtime/guard_activity_reporter.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <optional>

namespace faultline {
namespace guard_activity_reporter_impl {

constexpr auto kReportFirstBackoff = std::chrono::milliseconds(250);
constexpr auto kReportMaxBackoff = std::chrono::milliseconds(5'000);
constexpr auto kReportStopFlush = std::chrono::milliseconds(2'000);
constexpr uint64_t kReportCallTimeoutMs = 5'000;

}  // namespace guard_activity_reporter_impl

using namespace guard_activity_reporter_impl;

GuardActivityReporter::GuardActivityReporter(std::shared_ptr<const CpLink> link, std::unique_ptr<ActivitySpool> spool,
                                             Log log)
    : link_(std::move(link)), spool_(std::move(spool)), spooled_at_start_(spool_->size()), log_(std::move(log)) {}

std::unique_ptr<GuardActivityReporter> GuardActivityReporter::start(std::shared_ptr<const CpLink> link,
                                                                    std::unique_ptr<ActivitySpool> spool, Log log) {
  std::unique_ptr<GuardActivityReporter> r(
      new GuardActivityReporter(std::move(link), std::move(spool), std::move(log)));
  r->sender_ = std::thread([p = r.get()] { p->run(); });
  return r;
}

Result<std::unique_ptr<GuardActivityReporter>> GuardActivityReporter::open(std::shared_ptr<const CpLink> link,
                                                                           const std::string& state_dir,
                                                                           const std::string& chain, Log log) {
  auto spool = ActivitySpool::open(state_dir + "/cp-spool-" + activity_file_word(chain) + ".jsonl");
  if (!spool) return spool.error();
  return start(std::move(link), std::move(*spool), std::move(log));
}

GuardActivityReporter::~GuardActivityReporter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  sender_.join();
  if (const size_t left = spool_->size(); left > 0)
    log_("faultline guard: faultcp: " + std::to_string(left) + " activity line" + (left == 1 ? "" : "s") +
         " not delivered yet, kept in " + spool_->path() + " for the next guard of this identity");
}

void GuardActivityReporter::add(const ActivityEntry& e, const std::string& line) {
  if (auto st = spool_->append({e.identity, e.seq, line}); !st)
    log_("faultline guard: faultcp: " + st.error().describe());
  // Through the sender's mutex: a wake between its check of the spool and its
  // wait would otherwise be lost, and the line wait for the next one.
  { std::lock_guard lock(mu_); }
  wake_.notify_one();
}

void GuardActivityReporter::note_problem(const std::string& problem) {
  if (problem == last_problem_) return;
  last_problem_ = problem;
  if (!problem.empty())
    log_("faultline guard: faultcp: activity not delivered (" + problem + "); spooled in " + spool_->path() +
         ", retrying");
}

bool GuardActivityReporter::send_one_batch() {
  auto batch = spool_->front(single_ ? 1 : kMaxBatchEntries, kMaxBatchBytes);
  if (batch.empty()) return true;
  std::string body;
  for (const auto& l : batch) body += l.line;
  auto a = link_->call("POST", "/v1/guardrails/activity", body, "application/x-ndjson", kReportCallTimeoutMs);
  const int code = a ? a->response.status.code : 0;
  if (code == 200) {
    std::map<std::string, uint64_t> through;
    if (auto j = answer_object(*a); j && j->contains("stored_through") && (*j)["stored_through"].is_object())
      for (const auto& [id, seq] : (*j)["stored_through"].items())
        if (seq.is_number_unsigned()) through[id] = seq.get<uint64_t>();
    if (auto d = spool_->drop(batch.size(), through); !d) log_("faultline guard: faultcp: " + d.error().describe());
    if (!last_problem_.empty()) {
      log_("faultline guard: faultcp: reachable again, delivering the spooled activity");
      last_problem_.clear();
    }
    single_ = false;
    return true;
  }
  if (code == 400 || code == 413) {
    // faultcp will never take this batch as it is: find the line it refuses,
    // and drop only that one (it stays in the local activity log).
    if (!single_ && batch.size() > 1) {
      single_ = true;
      return true;
    }
    log_("faultline guard: faultcp refuses activity line " + batch[0].identity + " seq " +
         std::to_string(batch[0].seq) + " (" + answer_problem(a) + "): dropped from the spool, kept in the local log");
    if (auto st = spool_->drop_first(); !st) log_("faultline guard: faultcp: " + st.error().describe());
    return true;
  }
  note_problem(answer_problem(a));
  return false;
}

void GuardActivityReporter::run() {
  auto backoff = kReportFirstBackoff;
  std::optional<std::chrono::steady_clock::time_point> stop_by;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stopping_ || spool_->size() > 0; });
      if (stopping_ && !stop_by) stop_by = std::chrono::steady_clock::now() + kReportStopFlush;
    }
    if (stop_by && (spool_->size() == 0 || std::chrono::steady_clock::now() >= *stop_by)) return;
    if (send_one_batch()) {
      backoff = kReportFirstBackoff;
      continue;
    }
    std::unique_lock lock(mu_);
    if (stop_by) return;  // faultcp is not answering: what is left stays spooled
    wake_.wait_for(lock, backoff, [&] { return stopping_; });
    backoff = std::min(backoff * 2, kReportMaxBackoff);
  }
}

std::string activity_file_word(const std::string& identity) {
  std::string out;
  for (char ch : identity)
    out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '@' || ch == '.' || ch == '_' || ch == '-' ? ch : '_';
  return out.substr(0, 120);
}

}  // namespace faultline
