// The approvals API on a unix socket: the tree's control-API HTTP server (as
// faultd's local API), one thread, decisions handed straight to the queue.
#include "userspace/guard/approval_socket.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "userspace/net/http_router.h"
#include "userspace/net/http_server.h"

namespace faultline {
namespace approval_socket_impl {

std::string rfc3339(std::chrono::system_clock::time_point t) {
  return iso8601(std::chrono::duration<double>(t.time_since_epoch()).count());
}

// Ours, a folder, and closed to others: sockets of a guard are its approvals.
Status check_private_dir(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return errno_error(dir);
  if (!S_ISDIR(st.st_mode)) return make_error(ENOTDIR, dir + ": not a folder");
  if (st.st_uid != ::geteuid())
    return make_error(EPERM, dir + ": owned by uid " + std::to_string(st.st_uid) + ", not us");
  if ((st.st_mode & 077) != 0)
    return make_error(EPERM, dir + ": open to other users (mode " + std::to_string(st.st_mode & 0777) + ")");
  return {};
}

}  // namespace approval_socket_impl

using namespace approval_socket_impl;

Result<std::string> guard_socket_dir(bool create) {
  std::string dir;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && x[0] == '/')
    dir = std::string(x) + "/faultline";
  else if (::geteuid() == 0)
    dir = "/run/faultline";
  else
    dir = "/tmp/faultline-" + std::to_string(::geteuid());
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_error("mkdir " + dir);
  struct stat st {};
  if (!create && ::lstat(dir.c_str(), &st) != 0) return errno_error(dir);
  FL_TRY(check_private_dir(dir));
  return dir;
}

std::string guard_socket_path(const std::string& dir, int pid) {
  return dir + "/guard-" + std::to_string(pid) + ".sock";
}

nlohmann::json approval_json(const PendingApproval& p) {
  return {{"id", p.id},
          {"subject", p.subject == ApprovalSubject::Exec ? "exec" : "request"},
          {"identity", p.identity},
          {"method", p.method},
          {"host", p.host},
          {"path", p.path},
          {"rule", p.rule},
          {"reason", p.reason},
          {"created", rfc3339(p.created)},
          {"deadline", rfc3339(p.deadline)}};
}

struct ApprovalSocket::State {
  HttpServer server;
  HttpRouter router;
};

Result<std::unique_ptr<ApprovalSocket>> ApprovalSocket::start(const std::string& path, ApprovalQueue& queue,
                                                              GuardAbout about, ExecGrants* grants) {
  auto server = HttpServer::create();
  if (!server) return server.error();
  std::unique_ptr<ApprovalSocket> s(new ApprovalSocket);
  s->state_ = std::make_unique<State>(State{std::move(*server), {}});
  s->path_ = path;
  HttpRouter& r = s->state_->router;
  r.add("GET", "/v1/approvals", [&queue, about, grants](const HttpRequest&, const PathParams&) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : queue.list()) list.push_back(approval_json(p));
    nlohmann::json j{{"guard", {{"pid", about.pid}, {"identity", about.identity}, {"command", about.command}}},
                     {"approvals", std::move(list)}};
    if (grants != nullptr) {
      nlohmann::json g = nlohmann::json::array();
      for (const auto& e : grants->list())
        g.push_back({{"id", e.id}, {"command", e.command}, {"rule", e.rule}, {"created", rfc3339(e.created)}});
      j["grants"] = std::move(g);
    }
    return HttpReply::json(200, j.dump());
  });
  if (grants != nullptr) {
    r.add("POST", "/v1/grants/{id}/revoke", [grants](const HttpRequest&, const PathParams& params) {
      const std::string& id = params.at("id");
      size_t n = 0;
      if (id == "all") {
        n = grants->revoke_all();
      } else if (grants->revoke(id)) {
        n = 1;
      } else {
        return HttpReply::error(404, "no grant " + id + " (faultctl approvals list shows them)");
      }
      return HttpReply::json(200, nlohmann::json{{"revoked", n}}.dump());
    });
  }
  for (const bool approve : {true, false}) {
    r.add(
        "POST", approve ? "/v1/approvals/{id}/approve" : "/v1/approvals/{id}/deny",
        [&queue, approve](const HttpRequest& req, const PathParams& params) {
          std::string reason;
          if (!req.body.empty()) {
            auto j = nlohmann::json::parse(req.body, nullptr, false);
            if (j.is_discarded() || !j.is_object()) return HttpReply::error(400, "the body is not a JSON object");
            if (j.contains("reason")) {
              if (!j["reason"].is_string()) return HttpReply::error(400, "reason: expected a string");
              reason = j["reason"].get<std::string>();
            }
          }
          const std::string& id = params.at("id");
          auto done = queue.decide(id, approve, reason);
          if (!done) return HttpReply::error(404, done.error().message);
          nlohmann::json j{{"id", id}, {"decision", approve ? "approve" : "deny"}, {"approval", approval_json(*done)}};
          return HttpReply::json(200, j.dump());
        });
  }
  FL_TRY(s->state_->server.listen_unix(path, 0600, r.handler()));
  s->stop_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!s->stop_) return errno_error("eventfd");
  s->thread_ = std::thread([st = s->state_.get(), fd = s->stop_.get()] { (void)st->server.run(fd); });
  return s;
}

ApprovalSocket::~ApprovalSocket() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
}

}  // namespace faultline
