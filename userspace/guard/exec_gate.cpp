// A seccomp filter that hands execve and execveat to us, and the thread that
// reads each one's words from the caller's memory and answers.
#include "userspace/guard/exec_gate.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "base/fd_passing.h"
#include "base/remote_memory.h"
#include "base/seccomp_notify.h"

namespace faultline {
namespace {

constexpr size_t kMaxArgs = 4096;        // more words than this: unreadable (and refused when enforcing)
constexpr size_t kMaxArgBytes = 131072;  // MAX_ARG_STRLEN: the kernel's own cap on one word

// The words of one pending exec: the path, then argv[1...].
Result<std::vector<std::string>> exec_words(const seccomp_notif& req, int execve_nr) {
  const auto pid = static_cast<pid_t>(req.pid);
  const bool is_execve = static_cast<int>(req.data.nr) == execve_nr;
  const uint64_t path_at = is_execve ? req.data.args[0] : req.data.args[1];
  const uint64_t argv_at = is_execve ? req.data.args[1] : req.data.args[2];
  std::vector<std::string> words;
  auto path = read_remote_string(pid, path_at, PATH_MAX);
  if (!path) return make_error(0, "the path could not be read");
  if (path->empty() && !is_execve) {
    // execveat(fd, "", ..., AT_EMPTY_PATH), fexecve(): the file the fd names.
    const std::string link =
        "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(static_cast<int>(req.data.args[0]));
    char target[PATH_MAX];
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof target)) return make_error(0, "the fd's file could not be read");
    path->assign(target, static_cast<size_t>(n));
  }
  words.push_back(*path);
  if (argv_at == 0) return words;  // Linux takes a NULL argv as empty
  auto pointers = read_remote_pointers(pid, argv_at, kMaxArgs);
  if (!pointers) return make_error(0, "argv could not be read (or has over " + std::to_string(kMaxArgs) + " words)");
  for (size_t i = 1; i < pointers->size(); ++i) {
    auto w = read_remote_string(pid, (*pointers)[i], kMaxArgBytes);
    if (!w) return make_error(0, "argv[" + std::to_string(i) + "] could not be read");
    words.push_back(std::move(*w));
  }
  return words;
}

// The filter as BPF, made here by libseccomp: the child of a threaded process
// must not allocate, so it only loads these instructions.
Result<std::vector<sock_filter>> exec_filter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == nullptr) return make_error(0, "seccomp_init failed");
  const bool ok = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execve), 0) == 0 &&
                  seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(execveat), 0) == 0;
  UniqueFd mem(::memfd_create("faultline-exec-filter", MFD_CLOEXEC));
  const int rc = ok && mem ? seccomp_export_bpf(ctx, mem.get()) : -1;
  seccomp_release(ctx);
  if (!ok || !mem || rc != 0) return make_error(0, "the exec filter could not be built");
  const off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return make_error(0, "the exec filter came out malformed");
  std::vector<sock_filter> prog(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), prog.data(), static_cast<size_t>(size), 0) != size) return errno_error("reading the filter");
  return prog;
}

}  // namespace

Result<std::unique_ptr<ExecGate>> ExecGate::create(ExecGateOptions opts) {
  auto prog = exec_filter();
  if (!prog) return prog.error();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return errno_error("socketpair");
  std::unique_ptr<ExecGate> g(new ExecGate(std::move(opts)));
  g->ours_.reset(sv[0]);
  g->theirs_.reset(sv[1]);
  g->filter_ = std::move(*prog);
  return g;
}

ExecGate::~ExecGate() {
  stop_.store(true);
  // The thread may wait for the child's fd: a shutdown ends that wait.
  if (ours_) ::shutdown(ours_.get(), SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
}

bool ExecGate::install_in_child() const {
  // Root may install a filter without no_new_privs (sudo keeps working); a
  // user may not.
  if (::geteuid() != 0 && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  sock_fprog prog{static_cast<unsigned short>(filter_.size()), const_cast<sock_filter*>(filter_.data())};
  const long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
  if (fd < 0) {
    static constexpr char kWhy[] = "faultctl guard: --block-dangerous: cannot install the seccomp filter\n";
    (void)!::write(STDERR_FILENO, kWhy, sizeof kWhy - 1);
    return false;
  }
  const bool sent = send_fd(theirs_.get(), static_cast<int>(fd));
  ::close(static_cast<int>(fd));  // the parent's copy is the one that counts
  return sent;
}

void ExecGate::serve() {
  theirs_.reset();
  thread_ = std::thread([this] {
    const int fd = recv_fd(ours_.get());
    if (fd < 0) return;  // the child failed before its exec
    installed_.store(true);
    run(std::make_shared<UniqueFd>(fd));
  });
}

void ExecGate::run(const std::shared_ptr<UniqueFd>& notify) {
  const int notify_fd = notify->get();
  seccomp_notif* req = nullptr;
  seccomp_notif_resp* resp = nullptr;
  if (seccomp_notify_alloc(&req, &resp) != 0) return;
  const int execve_nr = seccomp_syscall_resolve_name("execve");
  prefer_sync_wake_up(notify_fd);
  // Until every process with the filter is gone (the fd hangs up) or we are destroyed.
  while (!stop_.load()) {
    pollfd p{notify_fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) break;
    std::memset(req, 0, sizeof(*req));
    if (seccomp_notify_receive(notify_fd, req) != 0) continue;
    ExecJudgement j;
    j.pid = static_cast<int>(req->pid);
    auto words = exec_words(*req, execve_nr);
    // Read from the caller's memory: trusted only if the call is still pending.
    if (seccomp_notify_id_valid(notify_fd, req->id) != 0) continue;
    if (words) {
      j.words = std::move(*words);
      j.risks = command_risks(j.words);
    } else {
      j.unreadable = words.error().message;
    }
    judged_.fetch_add(1);
    if (opts_.on_exec) opts_.on_exec(j);
    const bool flagged = !j.risks.empty() || !j.unreadable.empty();
    if (flagged && opts_.enforce && opts_.hold) {
      flagged_.fetch_add(1);
      held_.fetch_add(1);
      // Answered later, from whichever thread decides; the fd outlives us if need be.
      opts_.hold(j, [notify, id = req->id, blocked = blocked_](bool allow) {
        seccomp_notif_resp r{};
        r.id = id;
        if (allow) {
          r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        } else {
          r.error = -EPERM;
          blocked->fetch_add(1);
        }
        (void)::ioctl(notify->get(), SECCOMP_IOCTL_NOTIF_SEND, &r);
      });
      continue;
    }
    j.blocked = flagged && opts_.enforce;
    std::memset(resp, 0, sizeof(*resp));
    resp->id = req->id;
    if (j.blocked) {
      resp->error = -EPERM;
      blocked_->fetch_add(1);
    } else {
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    }
    // Reported before the answer: an exec that is let go may end the command,
    // and the report must not be lost to the shutdown that follows.
    if (flagged) {
      flagged_.fetch_add(1);
      if (opts_.on_flagged) opts_.on_flagged(j);
    }
    (void)seccomp_notify_respond(notify_fd, resp);
  }
  seccomp_notify_free(req, resp);
}

std::string exec_command_text(const ExecJudgement& j) {
  if (!j.unreadable.empty()) return "pid " + std::to_string(j.pid) + ": " + j.unreadable;
  std::string line;
  for (const auto& w : j.words) line += (line.empty() ? "" : " ") + w;
  return line;
}

}  // namespace faultline
