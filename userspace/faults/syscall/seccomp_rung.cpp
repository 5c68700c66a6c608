// The seccomp rung: a filter installed in the wrapped command hands every listed
// syscall to us (user notification); a thread answers each at once, failing it
// or letting it continue. Works on any kernel with seccomp, for a command only.
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/fd_passing.h"
#include "base/remote_memory.h"
#include "base/seccomp_notify.h"
#include "base/seeded_random.h"
#include "base/unique_fd.h"
#include "base/units.h"
#include "userspace/faults/syscall/path_args.h"
#include "userspace/faults/syscall/rung.h"

namespace faultline {
namespace {

// The dynamic loader's own opens (the ld.so cache, shared libraries): failing
// them stops the program before its main(), which tests nothing the operator
// cares about. They pass unless --include-loader.
bool loader_path(const std::string& p) {
  if (p == "/etc/ld.so.cache" || p == "/etc/ld.so.preload") return true;
  auto so = p.rfind(".so");
  return so != std::string::npos && (so + 3 == p.size() || p[so + 3] == '.');
}

// The target of a /proc/TID/ link (cwd, fd/N), if it is a path.
std::optional<std::string> proc_link(pid_t tid, const std::string& what) {
  const std::string link = "/proc/" + std::to_string(tid) + "/" + what;
  char target[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target));
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof(target)) || target[0] != '/') return std::nullopt;
  return std::string(target, static_cast<size_t>(n));
}

// The absolute, lexically normalized paths a file syscall names: each path
// argument read from the caller, a relative one resolved against its dirfd
// argument (AT_FDCWD: the calling thread's cwd) or the cwd. The base comes
// from /proc, so it is the kernel's own (symlinks in it resolved); the part
// the caller wrote is normalized without following symlinks. A path that
// cannot be read or resolved is left out: it cannot match.
std::vector<std::string> call_paths(const seccomp_notif& req, const std::vector<PathArg>& args) {
  std::vector<std::string> out;
  const auto tid = static_cast<pid_t>(req.pid);
  for (const PathArg& a : args) {
    const uint64_t ptr = req.data.args[a.path];
    // A NULL path (utimensat) or "" (AT_EMPTY_PATH) names the dirfd itself.
    std::optional<std::string> raw =
        ptr == 0 ? std::optional<std::string>(std::string()) : read_remote_string(tid, ptr, PATH_MAX);
    if (!raw) continue;
    if (!raw->empty() && raw->front() == '/') {
      out.push_back(normalize_path(*raw));
      continue;
    }
    const int dirfd = a.dirfd < 0 ? AT_FDCWD : static_cast<int>(req.data.args[a.dirfd]);
    auto base = dirfd == AT_FDCWD ? proc_link(tid, "cwd") : proc_link(tid, "fd/" + std::to_string(dirfd));
    if (base) out.push_back(resolve_path(*base, *raw));
  }
  return out;
}

class SeccompRung final : public SyscallRung {
 public:
  ~SeccompRung() override {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  Result<RungStart> start(const SyscallFaultSpec& spec) override {
    if (spec.command.empty()) return input_error(EINVAL, "seccomp user notification needs a command to wrap");
    spec_ = spec;
    std::vector<int> nrs;
    for (const auto& s : spec.syscalls) nrs.push_back(seccomp_syscall_resolve_name(s.c_str()));
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return errno_error("socketpair");
    UniqueFd ours(sv[0]), theirs(sv[1]);
    const int child_sock = sv[1];
    // In the child: a filter that hands every listed syscall to us, then exec.
    auto child = HeldChild::spawn(
        spec.command,
        [nrs, child_sock]() -> bool {
          scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
          if (ctx == nullptr) return false;
          for (int nr : nrs) {
            if (seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0) != 0) return false;
          }
          if (seccomp_load(ctx) != 0) {
            std::fprintf(stderr, "faultctl run syscall: cannot install the seccomp filter\n");
            return false;
          }
          int fd = seccomp_notify_fd(ctx);
          return fd >= 0 && send_fd(child_sock, fd);
        },
        "faultctl run syscall");
    if (!child) return child.error();
    theirs.reset();
    sock_ = std::move(ours);
    RungStart s;
    s.scope = "command " + spec.command[0] + " pid " + std::to_string(child->pid());
    s.how = "seccomp user notification";
    const uint64_t armed = boottime_ns();
    end_ns_ = armed + spec.duration_ns;
    start_ns_ = spec.start_after_ns ? armed + spec.start_after_ns : 0;
    s.expires_ns = end_ns_;
    s.event["pid"] = child->pid();
    s.child.emplace(std::move(*child));
    return s;
  }

  // The child installs its filter between the release and its exec, and hands
  // us the filter's notify fd: its first listed call waits for serve().
  Status release(HeldChild& child) override {
    FL_TRY(child.release());
    notify_.reset(recv_fd(sock_.get()));
    sock_.reset();
    if (!notify_) return make_error(0, "the command could not install its seccomp filter");
    thread_ = std::thread([this] { serve(); });
    return {};
  }

  void disarm() override { disarmed_.store(true); }

  RungCounts counts() const override {
    return {injected_.load(), passed_.load(), cap_refused_.load(), reached_ns_.load()};
  }

 private:
  // Answers every notification until the command and its children are gone
  // (the notify fd hangs up) or the rung is destroyed. After disarm() or the
  // end of the fault, every call goes ahead unchanged: the filter stays with the
  // command for life.
  void serve() {
    seccomp_notif* req = nullptr;
    seccomp_notif_resp* resp = nullptr;
    if (seccomp_notify_alloc(&req, &resp) != 0) return;
    prefer_sync_wake_up(notify_.get());
    // One thread draws for every call, in the order the calls arrive: with the
    // same seed, the same sequence of matching calls gets the same answers.
    SeededRandom rng(spec_.seed.value_or(draw_seed()));
    const uint32_t prob = percent_to_prob(spec_.percent);
    const int open_nr = seccomp_syscall_resolve_name("open");
    const int openat_nr = seccomp_syscall_resolve_name("openat");
    const int openat2_nr = seccomp_syscall_resolve_name("openat2");
    std::set<int> fd_calls;
    for (const char* n : {"read", "pread64", "readv", "preadv", "preadv2", "fstat", "close", "lseek"})
      fd_calls.insert(seccomp_syscall_resolve_name(n));
    std::map<int, std::vector<PathArg>> path_args;  // --path: the path arguments of each listed syscall
    if (!spec_.paths.empty()) {
      for (const auto& s : spec_.syscalls) path_args[seccomp_syscall_resolve_name(s.c_str())] = path_args_of(s);
    }
    while (!stop_.load()) {
      pollfd p{notify_.get(), POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) break;
      std::memset(req, 0, sizeof(*req));
      if (seccomp_notify_receive(notify_.get(), req) != 0) continue;
      const uint64_t now = boottime_ns();
      // In scope: armed, started, not over, and not the loader's own files.
      bool inject = !disarmed_.load() && now < end_ns_ && now >= start_ns_;
      // --path: only a call naming a path under a prefix is a candidate; every
      // other call continues and counts for nothing (not for --after either).
      if (inject && !path_args.empty()) {
        inject = false;
        auto it = path_args.find(req->data.nr);
        if (it != path_args.end()) {
          const std::vector<std::string> named = call_paths(*req, it->second);
          // Read from the caller's memory and /proc: trust it only if the call is still pending.
          if (seccomp_notify_id_valid(notify_.get(), req->id) == 0) {
            for (const auto& p : named) {
              for (const auto& prefix : spec_.paths) inject = inject || under_prefix(p, prefix);
            }
          }
        }
      }
      if (inject && !spec_.include_loader) {
        uint64_t arg = 0;
        int nr = req->data.nr;
        if (nr == open_nr)
          arg = req->data.args[0];
        else if (nr == openat_nr || nr == openat2_nr)
          arg = req->data.args[1];
        if (arg != 0) {
          auto path = read_remote_string(static_cast<pid_t>(req->pid), arg, PATH_MAX);
          // The path was read from the caller's memory: trust it only if the call is still pending.
          if (path && seccomp_notify_id_valid(notify_.get(), req->id) == 0 && loader_path(*path)) inject = false;
        } else if (fd_calls.contains(nr)) {
          // read/pread/mmap of a library the loader opened: same exemption, by the fd's target.
          std::string link =
              "/proc/" + std::to_string(req->pid) + "/fd/" + std::to_string(static_cast<int>(req->data.args[0]));
          char target[4096];
          ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
          if (n > 0 && loader_path(std::string(target, static_cast<size_t>(n)))) inject = false;
        }
      }
      // The brakes, in the kernel rungs' order: --after, the draw, the cap.
      // One thread answers every call, so plain counters are exact.
      if (inject && seen_++ < spec_.after) inject = false;
      if (inject) inject = rng.chance(prob);
      if (inject && spec_.max_injections) {
        if (claimed_++ >= spec_.max_injections) {
          inject = false;
          cap_refused_.fetch_add(1);
        } else if (claimed_ == spec_.max_injections) {
          reached_ns_.store(boottime_ns());
        }
      }
      std::memset(resp, 0, sizeof(*resp));
      resp->id = req->id;
      if (inject) {
        resp->error = -spec_.err;
        injected_.fetch_add(1);
      } else {
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        passed_.fetch_add(1);
      }
      (void)seccomp_notify_respond(notify_.get(), resp);
    }
    seccomp_notify_free(req, resp);
  }

  SyscallFaultSpec spec_;
  uint64_t end_ns_ = 0;
  uint64_t start_ns_ = 0;            // --start-after: every call passes before it
  uint64_t seen_ = 0, claimed_ = 0;  // serve() only: matching calls, injections asked for
  UniqueFd sock_;                    // ours of the socket pair the notify fd comes over
  UniqueFd notify_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, disarmed_{false};
  std::atomic<uint64_t> injected_{0}, passed_{0}, cap_refused_{0}, reached_ns_{0};
};

}  // namespace

std::unique_ptr<SyscallRung> make_seccomp_rung() { return std::make_unique<SeccompRung>(); }

}  // namespace faultline
