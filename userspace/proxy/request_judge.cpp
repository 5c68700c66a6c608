// Completing a held request from any thread: the verdict travels to the
// worker that holds the connection through that worker's own wake-up path.
#include "userspace/proxy/request_judge.h"

namespace faultline {

HeldRequest::HeldRequest(std::shared_ptr<HeldVerdictInbox> inbox, uint64_t id)
    : inbox_(std::move(inbox)), done_(std::make_shared<std::atomic<bool>>(false)), id_(id) {}

bool HeldRequest::complete(RequestVerdict verdict) const {
  if (!inbox_ || verdict.kind == RequestVerdict::Kind::hold) return false;
  if (done_->exchange(true)) return false;
  return inbox_->post(id_, std::move(verdict));
}

bool HeldVerdictInbox::post(uint64_t id, RequestVerdict verdict) {
  std::lock_guard lock(mu_);
  if (!deliver_) return false;
  deliver_(id, std::move(verdict));
  return true;
}

void HeldVerdictInbox::close() {
  std::lock_guard lock(mu_);
  deliver_ = nullptr;
}

}  // namespace faultline
