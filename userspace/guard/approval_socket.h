// The local approvals API of one running guard: HTTP/1.1 + JSON on a unix
// socket of the user's runtime folder (mode 0600), served on a thread of its
// own, which `faultctl approvals` finds and talks to (docs/guard.md, "Approvals").
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/guard/approval_queue.h"
#include "userspace/guard/exec_grants.h"

namespace faultline {

// Where the guards of this user put their sockets: $XDG_RUNTIME_DIR/faultline,
// else /run/faultline for root, else /tmp/faultline-<uid>. Made (mode 0700)
// when `create`; a folder that is not ours or is open to others is refused.
[[nodiscard]] Result<std::string> guard_socket_dir(bool create);
// "<dir>/guard-<pid>.sock"
[[nodiscard]] std::string guard_socket_path(const std::string& dir, int pid);

// An approval as the API shows it: {id, identity, method, host, path, rule,
// reason, created, deadline} (times in RFC 3339 UTC).
[[nodiscard]] nlohmann::json approval_json(const PendingApproval& p);

// What the guard tells a client about itself (GET /v1/approvals's "guard").
struct GuardAbout {
  int pid = 0;
  std::string identity;
  std::string command;
};

//   GET  /v1/approvals                {"guard":{pid,identity,command},"approvals":[...]}
//   POST /v1/approvals/{id}/approve   body {"reason":R} optional -> 200 {"id","decision":"approve"}
//   POST /v1/approvals/{id}/deny      body {"reason":R} optional -> 200 {"id","decision":"deny"}
//   POST /v1/grants/{id}/revoke       an "always allow" of --approve-dangerous; id "all": every one
//                                     -> 200 {"revoked":N}
//   errors: {"error","status"}: 404 no such held request or grant, 400 a bad body
// With grants, GET /v1/approvals also lists them: "grants":[{id,command,rule,created}].
class ApprovalSocket {
 public:
  // Listens at `path` (a stale socket file is replaced) and serves until
  // destroyed. grants may be null (a guard that holds no execs).
  [[nodiscard]] static Result<std::unique_ptr<ApprovalSocket>> start(const std::string& path, ApprovalQueue& queue,
                                                                     GuardAbout about, ExecGrants* grants = nullptr);
  ~ApprovalSocket();  // stops serving, removes the socket file
  ApprovalSocket(const ApprovalSocket&) = delete;
  ApprovalSocket& operator=(const ApprovalSocket&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  ApprovalSocket() = default;
  struct State;
  std::unique_ptr<State> state_;
  std::string path_;
  UniqueFd stop_;
  std::thread thread_;
};

}  // namespace faultline
