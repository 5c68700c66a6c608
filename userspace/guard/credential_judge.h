// --creds: the guard's judge with credentials set on what it forwards. Each
// request to a host of the credentials file is judged by the guard as it came;
// when the verdict is to forward it (at once, after its body, or after an
// approval), its header is set from the secret (replacing the command's own),
// or, the secret missing, the request is denied instead (rule "creds").
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "userspace/guard/credential_store.h"
#include "userspace/guard/guard_judge.h"
#include "userspace/proxy/request_judge.h"

namespace faultline {

class CredentialJudge final : public RequestJudge {
 public:
  CredentialJudge(std::shared_ptr<GuardJudge> guard, std::shared_ptr<const CredentialStore> store);

  [[nodiscard]] RequestVerdict judge(const RequestHead& head, HeldRequest later) override;
  [[nodiscard]] RequestVerdict judge_body(uint64_t request_id, const RequestBodyChunk& chunk,
                                          HeldRequest later) override;
  void withdrawn(uint64_t request_id) override;
  void on_response_bytes(uint64_t request_id, std::string_view bytes, bool end) override;

 private:
  struct Pending {
    RequestHead head;  // without its headers' values: only what a denial names
    size_t entry = 0;
  };
  // A final verdict for a request of a credentials host: a forward gets its
  // header, or becomes a denial when the secret is missing.
  [[nodiscard]] RequestVerdict finish(const Pending& p, RequestVerdict v) const;
  // `later` as the guard completes it, through finish().
  [[nodiscard]] HeldRequest wrap(const Pending& p, HeldRequest later) const;

  std::shared_ptr<GuardJudge> guard_;
  std::shared_ptr<const CredentialStore> store_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Pending> pending_;  // requests whose body the guard reads
};

}  // namespace faultline
