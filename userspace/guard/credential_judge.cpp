// The credentials set on forwarded requests, around the guard's own judge.
#include "userspace/guard/credential_judge.h"

namespace faultline {

CredentialJudge::CredentialJudge(std::shared_ptr<GuardJudge> guard, std::shared_ptr<const CredentialStore> store)
    : guard_(std::move(guard)), store_(std::move(store)) {}

namespace credential_judge_impl {

RequestVerdict finish_with(GuardJudge& guard, const CredentialStore& store, const RequestHead& head, size_t entry,
                           RequestVerdict v) {
  if (v.kind != RequestVerdict::Kind::forward) return v;
  auto header = store.header(entry);
  if (!header) return guard.deny_credential(head, header.error().message);
  v.set_headers.emplace_back(std::move(header->first), std::move(header->second));
  return v;
}

}  // namespace credential_judge_impl

using namespace credential_judge_impl;

RequestVerdict CredentialJudge::finish(const Pending& p, RequestVerdict v) const {
  return finish_with(*guard_, *store_, p.head, p.entry, std::move(v));
}

HeldRequest CredentialJudge::wrap(const Pending& p, HeldRequest later) const {
  // The guard completes a hold (an approval, a budget asked on the network)
  // through this inbox; the verdict is finished here, then handed on. The
  // guard keeps the inbox in its queue until then, possibly past this judge:
  // it is held weakly (no cycle), the store strongly.
  auto inbox = std::make_shared<HeldVerdictInbox>(
      [guard = std::weak_ptr<GuardJudge>(guard_), store = store_, p, later](uint64_t, RequestVerdict v) {
        auto g = guard.lock();
        if (!g) return;  // the guard is going: nothing is sent
        (void)later.complete(finish_with(*g, *store, p.head, p.entry, std::move(v)));
      });
  return HeldRequest(std::move(inbox), later.id());
}

RequestVerdict CredentialJudge::judge(const RequestHead& head, HeldRequest later) {
  std::optional<size_t> entry;
  if (head.stage == RequestStage::request || head.stage == RequestStage::inner)
    entry = store_->match(head.host, head.port);
  if (!entry) return guard_->judge(head, std::move(later));
  Pending p;
  p.head = head;
  // Only what a denial's format needs: no value of the command's own headers is kept.
  std::erase_if(p.head.headers, [](const auto& h) { return h.first != "anthropic-version"; });
  p.entry = *entry;
  if (head.stage == RequestStage::request)
    return guard_->deny_credential(p.head, "the credentials of " + store_->entry(p.entry).where +
                                               " are sent over HTTPS only, and this request is plain HTTP");
  RequestVerdict v = guard_->judge(head, wrap(p, later));
  if (v.kind == RequestVerdict::Kind::need_body) {
    std::lock_guard lock(mu_);
    pending_[head.id] = std::move(p);
    return v;
  }
  return finish(p, std::move(v));
}

RequestVerdict CredentialJudge::judge_body(uint64_t request_id, const RequestBodyChunk& chunk, HeldRequest later) {
  std::optional<Pending> p;
  {
    std::lock_guard lock(mu_);
    if (auto it = pending_.find(request_id); it != pending_.end()) p = it->second;
  }
  if (!p) return guard_->judge_body(request_id, chunk, std::move(later));
  RequestVerdict v = guard_->judge_body(request_id, chunk, wrap(*p, later));
  if (v.kind == RequestVerdict::Kind::need_body) return v;
  {
    std::lock_guard lock(mu_);
    pending_.erase(request_id);
  }
  return finish(*p, std::move(v));
}

void CredentialJudge::withdrawn(uint64_t request_id) {
  {
    std::lock_guard lock(mu_);
    pending_.erase(request_id);
  }
  guard_->withdrawn(request_id);
}

void CredentialJudge::on_response_bytes(uint64_t request_id, std::string_view bytes, bool end) {
  guard_->on_response_bytes(request_id, bytes, end);
}

}  // namespace faultline
