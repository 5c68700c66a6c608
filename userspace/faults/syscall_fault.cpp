// Syscall errno injection: cgroup socket hooks where they serve, then BPF LSM
// hooks, else seccomp user notification for a wrapped command. Each run says
// which it used and why.
#include "userspace/faults/syscall_fault.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <sstream>

#include "faultline/sockaddr_abi.h"
#include "loader/features.h"
#include "loader/sockaddr_object.h"
#include "loader/syscall_lsm_object.h"
#include "userspace/faults/errno_names.h"
#include "userspace/faults/netfault_engine.h"
#include "userspace/faults/session_registry.h"
#include "userspace/faults/stop_signals.h"
#include "userspace/faults/units.h"
#include "userspace/policy/cgroup.h"

namespace faultline {
namespace {

uint32_t op_bits(const std::vector<std::string>& syscalls) {
  uint32_t bits = 0;
  for (const auto& s : syscalls) {
    if (s == "connect") bits |= FL_OP_BIT(FL_OP_CONNECT);
    if (s == "sendmsg" || s == "sendto") bits |= FL_OP_BIT(FL_OP_SENDMSG);
    if (s == "socket") bits |= FL_OP_BIT(FL_OP_SOCKET);
    if (s == "bind") bits |= FL_OP_BIT(FL_OP_BIND);
  }
  return bits;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// "EIO on openat,read at 30% for 10s": what the fault does, for people.
std::string describe(const SyscallFaultSpec& spec) {
  std::string what = errno_name(spec.err) + " on ";
  for (size_t i = 0; i < spec.syscalls.size(); ++i) what += (i ? "," : "") + spec.syscalls[i];
  std::ostringstream pct;
  pct << spec.percent;
  return what + " at " + pct.str() + "% for " + format_duration(spec.duration_ns);
}

// Registers the fault so that status lists it and abort reaches it.
std::optional<SessionOwner> register_fault(const SyscallFaultSpec& spec, const std::string& mechanism,
                                           const std::string& scope, int policy_fd, int stats_fd, uint64_t expires_ns,
                                           std::ostream& err) {
  Session s;
  s.kind = "syscall";
  s.mechanism = mechanism;
  s.summary = describe(spec) + ", " + scope + " (" + mechanism + ")";
  s.policy_map_id = policy_fd >= 0 ? map_id_of(policy_fd) : 0;
  s.stats_map_id = stats_fd >= 0 ? map_id_of(stats_fd) : 0;
  s.expires_ns = expires_ns;
  return register_session(std::move(s), err);
}

struct WaitResult {
  int code = 0;
  bool aborted = false;
};

// Waits for the fault's end: its expiry when nothing is wrapped, else the
// command's exit. Stop signals go to the command when there is one. An abort
// (`faultctl abort`, which has already disarmed the kernel side) runs on_abort
// once: without a command that is the end; with one, the command runs on.
template <typename OnAbort>
WaitResult wait_for_end(pid_t child, uint64_t end, StopSignals& signals, std::optional<SessionOwner>& session,
                        OnAbort on_abort) {
  WaitResult r;
  while (true) {
    int status = 0;
    if (child >= 0 && ::waitpid(child, &status, WNOHANG) == child) {
      r.code = exit_code_of(status);
      return r;
    }
    if (child < 0 && boottime_ns() >= end) return r;
    if (!r.aborted && session && session->abort_requested()) {
      r.aborted = true;
      on_abort();
      session->end();
      if (child < 0) {
        r.code = 1;  // ended from outside, like an aborted packet fault
        return r;
      }
    }
    if (int sig = signals.pending(); sig != 0) {
      if (child >= 0) {
        ::kill(child, sig);
        (void)signals.take();
        continue;
      }
      r.code = 1;
      return r;
    }
    ::usleep(50'000);
  }
}

// Starts the command stopped on a pipe; `prepare` runs in the child before exec.
template <typename Prepare>
Result<pid_t> spawn(const std::vector<std::string>& command, int& go_write, Prepare prepare) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return errno_error("pipe");
  pid_t child = ::fork();
  if (child < 0) return errno_error("fork");
  if (child == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) _exit(127);
    if (!prepare()) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "faultctl run syscall: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  ::close(go[0]);
  go_write = go[1];
  return child;
}

int run_cgroup(const SyscallFaultSpec& spec, std::ostream& out, std::ostream& err) {
  std::optional<ScopedCgroup> fresh;
  UniqueFd cgroup_fd;
  std::string scope;
  if (!spec.command.empty()) {
    auto cg = ScopedCgroup::create("faultline-syscall-" + std::to_string(::getpid()));
    if (!cg) {
      err << "faultctl run syscall: " << cg.error().describe() << "\n";
      return 1;
    }
    fresh.emplace(std::move(*cg));
    cgroup_fd.reset(::dup(fresh->fd()));
    scope = "command " + spec.command[0];
  } else {
    std::string path = spec.cgroup;
    if (spec.pid != 0) {
      auto p = cgroup_of_pid(spec.pid);
      if (!p) {
        err << "faultctl run syscall: " << p.error().describe() << "\n";
        return 2;
      }
      path = *p;
    }
    auto fd = open_cgroup(path);
    if (!fd) {
      err << "faultctl run syscall: " << fd.error().describe() << "\n";
      return 2;
    }
    cgroup_fd = std::move(*fd);
    scope = spec.pid ? "pid " + std::to_string(spec.pid) : "cgroup " + spec.cgroup;
  }
  auto obj = SockaddrObject::load();
  if (!obj) {
    err << "faultctl run syscall: " << obj.error().describe() << "\n";
    return 1;
  }
  fl_sa_policy pol{};
  pol.armed = 1;
  pol.expires_ns = boottime_ns() + spec.duration_ns;  // the in-kernel deadman
  pol.target_tgid = static_cast<uint32_t>(spec.pid);
  pol.inject_ops = op_bits(spec.syscalls);
  pol.inject_prob = percent_to_prob(spec.percent);
  pol.inject_errno = static_cast<uint32_t>(spec.err);
  uint32_t zero = 0;
  if (bpf_map_update_elem(obj->policy_fd(), &zero, &pol, BPF_ANY) != 0 || !obj->attach(cgroup_fd.get()).ok()) {
    err << "faultctl run syscall: cannot attach the socket hooks: " << strerror(errno) << "\n";
    return 1;
  }
  StopSignals signals;
  pid_t child = -1;
  if (!spec.command.empty()) {
    int go = -1;
    auto c = spawn(spec.command, go, [] { return true; });
    if (!c) {
      err << "faultctl run syscall: " << c.error().describe() << "\n";
      return 1;
    }
    child = *c;
    if (auto st = fresh->join(child); !st) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      err << "faultctl run syscall: " << st.error().describe() << "\n";
      return 1;
    }
    ::write(go, "g", 1);
    ::close(go);
  }
  auto session = register_fault(spec, "cgroup", scope, obj->policy_fd(), obj->stats_fd(), pol.expires_ns, err);
  if (spec.json) {
    out << nlohmann::json{{"event", "started"},
                          {"mechanism", "cgroup"},
                          {"scope", scope},
                          {"id", session ? session->id() : ""}}
               .dump()
        << std::endl;
  } else {
    out << "syscall fault" << (session ? " " + session->id() : "") << ": " << describe(spec) << ", " << scope
        << " (cgroup socket hooks)" << std::endl;
  }
  auto [code, aborted] = wait_for_end(child, pol.expires_ns, signals, session, [&] {
    obj->detach();
    if (spec.json)
      out << nlohmann::json{{"event", "aborted"}}.dump() << std::endl;
    else
      out << "syscall fault aborted (faultctl abort)" << (child >= 0 ? ": the command runs on without it" : "")
          << std::endl;
  });
  const uint64_t injected = sum_sa_stats(obj->stats_fd()).value_or(fl_sa_stats{}).injected;
  obj->detach();
  if (spec.json)
    out << nlohmann::json{{"event", "ended"}, {"injected", injected}, {"exit_code", code}, {"aborted", aborted}}.dump()
        << std::endl;
  else
    out << "syscall fault ended: " << injected << " calls failed with " << errno_name(spec.err) << std::endl;
  return code;
}

// The LSM rung's operations: each syscall name maps to the one hook that sees it.
struct LsmOp {
  const char* syscall;
  fl_sc_op op;
  const char* hook;
};
constexpr LsmOp kLsmOps[] = {
    {"open", FL_SC_OPEN, "file_open"},         {"openat", FL_SC_OPEN, "file_open"},
    {"openat2", FL_SC_OPEN, "file_open"},      {"creat", FL_SC_OPEN, "file_open"},
    {"execve", FL_SC_EXEC, "bprm_check_security"}, {"execveat", FL_SC_EXEC, "bprm_check_security"},
    {"connect", FL_SC_CONNECT, "socket_connect"}, {"read", FL_SC_READ, "file_permission"},
    {"readv", FL_SC_READ, "file_permission"},  {"pread64", FL_SC_READ, "file_permission"},
    {"preadv", FL_SC_READ, "file_permission"}, {"preadv2", FL_SC_READ, "file_permission"},
    {"write", FL_SC_WRITE, "file_permission"}, {"writev", FL_SC_WRITE, "file_permission"},
    {"pwrite64", FL_SC_WRITE, "file_permission"}, {"pwritev", FL_SC_WRITE, "file_permission"},
    {"pwritev2", FL_SC_WRITE, "file_permission"}, {"unlink", FL_SC_UNLINK, "inode_unlink"},
    {"unlinkat", FL_SC_UNLINK, "inode_unlink"},
};

struct LsmCoverage {
  uint32_t ops = 0;
  std::string hooks;    // "file_open, file_permission"
  std::string missing;  // syscalls no hook serves
};

LsmCoverage lsm_coverage(const std::vector<std::string>& syscalls) {
  LsmCoverage c;
  for (const auto& s : syscalls) {
    const LsmOp* hit = nullptr;
    for (const auto& o : kLsmOps) {
      if (s == o.syscall) hit = &o;
    }
    if (hit == nullptr) {
      c.missing += (c.missing.empty() ? "" : ",") + s;
      continue;
    }
    if (c.hooks.find(hit->hook) == std::string::npos) c.hooks += (c.hooks.empty() ? "" : ", ") + std::string(hit->hook);
    c.ops |= FL_SC_BIT(hit->op);
  }
  return c;
}

// Depth of a cgroup below the cgroup2 root, for bpf_get_current_ancestor_cgroup_id.
uint32_t cgroup_level(const std::string& full_path) {
  std::string rel = full_path.substr(std::min(full_path.size(), features().cgroup_v2_mount.size()));
  uint32_t level = 0;
  bool in_name = false;
  for (char ch : rel) {
    if (ch == '/') in_name = false;
    else if (!in_name) in_name = true, ++level;
  }
  return level;
}

int run_lsm(const SyscallFaultSpec& spec, std::ostream& out, std::ostream& err) {
  const LsmCoverage cov = lsm_coverage(spec.syscalls);
  const bool wrapped = !spec.command.empty();
  std::ostream& info = wrapped ? err : out;  // the command owns our stdout
  fl_sc_policy pol{};
  std::optional<ScopedCgroup> fresh;
  std::string scope;
  if (wrapped) {
    auto cg = ScopedCgroup::create("faultline-syscall-" + std::to_string(::getpid()));
    if (!cg) {
      err << "faultctl run syscall: " << cg.error().describe() << "\n";
      return 1;
    }
    fresh.emplace(std::move(*cg));
    struct stat st {};
    if (::fstat(fresh->fd(), &st) != 0) {
      err << "faultctl run syscall: cannot stat " << fresh->path() << ": " << strerror(errno) << "\n";
      return 1;
    }
    pol.cgroup_id = st.st_ino;  // a cgroup's id is its directory's inode number
    pol.cgroup_level = cgroup_level(fresh->path());
    scope = "command " + spec.command[0];
  } else if (spec.pid != 0) {
    if (::kill(spec.pid, 0) != 0 && errno == ESRCH) {
      err << "faultctl run syscall: --pid " << spec.pid << ": no such process\n";
      return 2;
    }
    pol.target_tgid = static_cast<uint32_t>(spec.pid);
    scope = "pid " + std::to_string(spec.pid);
  } else {
    std::string full;
    auto fd = open_cgroup(spec.cgroup, &full);
    if (!fd) {
      err << "faultctl run syscall: " << fd.error().describe() << "\n";
      return 2;
    }
    struct stat st {};
    if (::fstat(fd->get(), &st) != 0) {
      err << "faultctl run syscall: cannot stat " << full << ": " << strerror(errno) << "\n";
      return 2;
    }
    pol.cgroup_id = st.st_ino;
    pol.cgroup_level = cgroup_level(full);
    scope = "cgroup " + spec.cgroup;
  }
  auto obj = SyscallLsmObject::load();
  if (!obj) {
    err << "faultctl run syscall: " << obj.error().describe() << "\n";
    return 1;
  }
  pol.armed = 1;
  pol.expires_ns = boottime_ns() + spec.duration_ns;  // the in-kernel deadman
  pol.prob = percent_to_prob(spec.percent);
  pol.err = static_cast<uint32_t>(spec.err);
  pol.flags = spec.include_loader ? 0 : FL_SC_SKIP_LOADER;
  // A wrapped command's own execve is how it starts, not a call it makes: exec
  // faults are armed once it runs (below).
  pol.ops = wrapped ? cov.ops & ~FL_SC_BIT(FL_SC_EXEC) : cov.ops;
  if (auto st = obj->set_policy(pol); !st) {
    err << "faultctl run syscall: " << st.error().describe() << "\n";
    return 1;
  }
  if (auto st = obj->attach(cov.ops); !st) {
    err << "faultctl run syscall: " << st.error().describe() << "\n";
    return 1;
  }
  StopSignals signals;
  pid_t child = -1;
  if (wrapped) {
    // The write end is close-on-exec in the child: EOF on the read end means
    // the command has been exec'd (or has died trying).
    int execd[2];
    if (::pipe2(execd, O_CLOEXEC) != 0) {
      err << "faultctl run syscall: pipe: " << strerror(errno) << "\n";
      return 1;
    }
    int go = -1;
    const int execd_read = execd[0];
    auto c = spawn(spec.command, go, [execd_read] {
      ::close(execd_read);
      return true;
    });
    ::close(execd[1]);
    if (!c) {
      ::close(execd[0]);
      err << "faultctl run syscall: " << c.error().describe() << "\n";
      return 1;
    }
    child = *c;
    if (auto st = fresh->join(child); !st) {
      ::close(execd[0]);
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      err << "faultctl run syscall: " << st.error().describe() << "\n";
      return 1;
    }
    ::write(go, "g", 1);
    ::close(go);
    char c2;
    while (::read(execd[0], &c2, 1) < 0 && errno == EINTR) {
    }
    ::close(execd[0]);
    if (pol.ops != cov.ops) {
      pol.ops = cov.ops;
      if (auto st = obj->set_policy(pol); !st) err << "faultctl run syscall: " << st.error().describe() << "\n";
    }
  }
  auto session = register_fault(spec, "lsm", scope, obj->policy_fd(), obj->stats_fd(), pol.expires_ns, err);
  if (spec.json) {
    out << nlohmann::json{{"event", "started"},
                          {"mechanism", "lsm"},
                          {"scope", scope},
                          {"hooks", cov.hooks},
                          {"id", session ? session->id() : ""}}
               .dump()
        << std::endl;
  } else {
    info << "syscall fault" << (session ? " " + session->id() : "") << ": " << describe(spec) << ", " << scope
         << " (BPF LSM: " << cov.hooks << ")" << std::endl;
  }
  auto [code, aborted] = wait_for_end(child, pol.expires_ns, signals, session, [&] {
    obj->detach();
    if (spec.json)
      out << nlohmann::json{{"event", "aborted"}}.dump() << std::endl;
    else
      info << "syscall fault aborted (faultctl abort)" << (wrapped ? ": the command runs on without it" : "")
           << std::endl;
  });
  uint64_t injected = 0, seen = 0;
  if (auto st = obj->stats()) {
    for (int i = 0; i < FL_SC_OP_MAX; ++i) {
      injected += st->injected[i];
      seen += st->seen[i];
    }
  }
  obj->detach();
  if (spec.json) {
    out << nlohmann::json{{"event", "ended"},
                          {"injected", injected},
                          {"seen", seen},
                          {"exit_code", code},
                          {"aborted", aborted}}
               .dump()
        << std::endl;
  } else {
    info << "syscall fault ended: " << injected << " calls failed with " << errno_name(spec.err) << ", "
         << seen - injected << " passed" << (wrapped ? "; command exited " + std::to_string(code) : "") << std::endl;
  }
  return code;
}

// The dynamic loader's own opens (the ld.so cache, shared libraries): failing
// them stops the program before its main(), which tests nothing the operator
// cares about. They pass unless --include-loader.
bool loader_path(const std::string& p) {
  if (p == "/etc/ld.so.cache" || p == "/etc/ld.so.preload") return true;
  auto so = p.rfind(".so");
  return so != std::string::npos && (so + 3 == p.size() || p[so + 3] == '.');
}

std::string read_remote_string(pid_t pid, uint64_t addr) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/mem", pid);
  UniqueFd mem(::open(path, O_RDONLY | O_CLOEXEC));
  if (!mem) return {};
  char buf[4096];
  ssize_t n = ::pread(mem.get(), buf, sizeof(buf) - 1, static_cast<off_t>(addr));
  if (n <= 0) return {};
  buf[n] = '\0';
  return std::string(buf, strnlen(buf, static_cast<size_t>(n)));
}

// Receives a file descriptor sent with SCM_RIGHTS.
int recv_fd(int sock) {
  char dummy;
  iovec iov{&dummy, 1};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof(ctrl);
  if (::recvmsg(sock, &msg, 0) <= 0) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(fd));
  return fd;
}

bool send_fd(int sock, int fd) {
  char dummy = 'f';
  iovec iov{&dummy, 1};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof(ctrl);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(fd));
  return ::sendmsg(sock, &msg, 0) > 0;
}

int run_seccomp(const SyscallFaultSpec& spec, std::ostream& out, std::ostream& err) {
  std::vector<int> nrs;
  for (const auto& s : spec.syscalls) nrs.push_back(seccomp_syscall_resolve_name(s.c_str()));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    err << "faultctl run syscall: socketpair: " << strerror(errno) << "\n";
    return 1;
  }
  int go = -1;
  const int child_sock = sv[1];
  // In the child: a filter that hands every listed syscall to us, then exec.
  auto child = spawn(spec.command, go, [&]() -> bool {
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
  });
  if (!child) {
    err << "faultctl run syscall: " << child.error().describe() << "\n";
    return 1;
  }
  ::close(sv[1]);
  StopSignals signals;
  ::write(go, "g", 1);
  ::close(go);
  UniqueFd notify(recv_fd(sv[0]));
  ::close(sv[0]);
  if (!notify) {
    int status = 0;
    ::waitpid(*child, &status, 0);
    err << "faultctl run syscall: the command could not install its seccomp filter\n";
    return 1;
  }
  const std::string scope = "command " + spec.command[0] + " pid " + std::to_string(*child);
  const uint64_t end = boottime_ns() + spec.duration_ns;
  auto session = register_fault(spec, "seccomp", scope, -1, -1, end, err);
  if (spec.json) {
    out << nlohmann::json{{"event", "started"},
                          {"mechanism", "seccomp"},
                          {"pid", *child},
                          {"id", session ? session->id() : ""}}
               .dump()
        << std::endl;
  } else {
    err << "syscall fault" << (session ? " " + session->id() : "") << ": " << describe(spec) << ", " << scope
        << " (seccomp user notification)" << std::endl;
  }
  seccomp_notif* req = nullptr;
  seccomp_notif_resp* resp = nullptr;
  if (seccomp_notify_alloc(&req, &resp) != 0) {
    ::kill(*child, SIGKILL);
    ::waitpid(*child, nullptr, 0);
    return 1;
  }
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> uni(0, 100);
  const int open_nr = seccomp_syscall_resolve_name("open");
  const int openat_nr = seccomp_syscall_resolve_name("openat");
  const int openat2_nr = seccomp_syscall_resolve_name("openat2");
  std::set<int> fd_calls;
  for (const char* n : {"read", "pread64", "readv", "preadv", "preadv2", "fstat", "close", "lseek"})
    fd_calls.insert(seccomp_syscall_resolve_name(n));
  uint64_t injected = 0, passed = 0;
  bool aborted = false;
  int status = 0;
  for (;;) {
    if (::waitpid(*child, &status, WNOHANG) == *child) break;
    if (int sig = signals.take(); sig != 0) ::kill(*child, sig);
    if (!aborted && session && session->abort_requested()) {
      // The filter stays with the command for life: from now on every call it
      // hands us goes ahead unchanged.
      aborted = true;
      session->end();
      if (spec.json)
        out << nlohmann::json{{"event", "aborted"}}.dump() << std::endl;
      else
        err << "syscall fault aborted (faultctl abort): the command runs on without it" << std::endl;
    }
    if (session && !aborted) session->set_counters({{"failed", injected}, {"passed", passed}});
    pollfd p{notify.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0 || !(p.revents & POLLIN)) continue;
    std::memset(req, 0, sizeof(*req));
    if (seccomp_notify_receive(notify.get(), req) != 0) continue;
    bool inject = !aborted && boottime_ns() < end && uni(rng) < spec.percent;
    if (inject && !spec.include_loader) {
      uint64_t arg = 0;
      int nr = req->data.nr;
      if (nr == open_nr) arg = req->data.args[0];
      else if (nr == openat_nr || nr == openat2_nr) arg = req->data.args[1];
      if (arg != 0) {
        std::string path = read_remote_string(static_cast<pid_t>(req->pid), arg);
        // The path was read from the caller's memory: trust it only if the call is still pending.
        if (seccomp_notify_id_valid(notify.get(), req->id) == 0 && loader_path(path)) inject = false;
      } else if (fd_calls.contains(nr)) {
        // read/pread/mmap of a library the loader opened: same exemption, by the fd's target.
        std::string link = "/proc/" + std::to_string(req->pid) + "/fd/" + std::to_string(static_cast<int>(req->data.args[0]));
        char target[4096];
        ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
        if (n > 0 && loader_path(std::string(target, static_cast<size_t>(n)))) inject = false;
      }
    }
    std::memset(resp, 0, sizeof(*resp));
    resp->id = req->id;
    if (inject) {
      resp->error = -spec.err;
      ++injected;
    } else {
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      ++passed;
    }
    (void)seccomp_notify_respond(notify.get(), resp);
  }
  seccomp_notify_free(req, resp);
  int code = exit_code_of(status);
  if (spec.json) {
    out << nlohmann::json{{"event", "ended"},
                          {"injected", injected},
                          {"passed", passed},
                          {"exit_code", code},
                          {"aborted", aborted}}
               .dump()
        << std::endl;
  } else {
    err << "syscall fault ended: " << injected << " calls failed with " << errno_name(spec.err) << ", " << passed
        << " passed; command exited " << code << std::endl;
  }
  return code;
}

}  // namespace

bool is_socket_syscall(const std::string& n) {
  return n == "connect" || n == "socket" || n == "sendmsg" || n == "sendto" || n == "bind";
}

Result<SyscallPlan> plan_syscall_fault(const SyscallFaultSpec& spec) {
  const auto& f = features();
  bool all_socket = std::all_of(spec.syscalls.begin(), spec.syscalls.end(), is_socket_syscall);
  std::string cgroup_why = f.set_retval.available && f.cgroup_v2.available
                               ? std::string("cgroup socket hooks with bpf_set_retval")
                               : "cgroup socket hooks unavailable: " + (f.set_retval.available ? f.cgroup_v2.detail : f.set_retval.detail);
  const LsmCoverage lsm = lsm_coverage(spec.syscalls);
  const bool lsm_serves = f.bpf_lsm.available && lsm.missing.empty() && (spec.command.empty() || f.cgroup_v2.available);
  const std::string lsm_why = "BPF LSM hooks (" + lsm.hooks + "); " + f.lsm_listed.detail;
  if (spec.via == "cgroup") {
    if (!all_socket) return make_error(ENOTSUP, "--via cgroup serves only connect, socket, sendmsg, sendto and bind");
    if (!f.set_retval.available || !f.cgroup_v2.available) return make_error(ENOTSUP, "--via cgroup: " + cgroup_why);
    return SyscallPlan{SyscallMechanism::CgroupSockAddr, cgroup_why};
  }
  if (spec.via == "lsm") {
    if (!f.bpf_lsm.available) return make_error(ENOTSUP, "--via lsm: " + f.bpf_lsm.detail);
    if (!lsm.missing.empty()) return make_error(ENOTSUP, "--via lsm: BPF LSM has no hook for " + lsm.missing);
    if (!lsm_serves) return make_error(ENOTSUP, "--via lsm: a command needs a cgroup v2: " + f.cgroup_v2.detail);
    return SyscallPlan{SyscallMechanism::BpfLsm, lsm_why};
  }
  if (spec.via == "seccomp") {
    if (spec.command.empty()) return make_error(ENOTSUP, "--via seccomp needs a command to wrap (-- COMMAND ARGS)");
    if (!f.seccomp_notify.available) return make_error(ENOTSUP, "--via seccomp: " + f.seccomp_notify.detail);
    return SyscallPlan{SyscallMechanism::SeccompNotify, "seccomp user notification for the wrapped command (forced)"};
  }
  if (all_socket && f.set_retval.available && f.cgroup_v2.available)
    return SyscallPlan{SyscallMechanism::CgroupSockAddr, cgroup_why};
  if (lsm_serves) return SyscallPlan{SyscallMechanism::BpfLsm, lsm_why};
  // The kprobe rung is built but not wired: no kernel we test on can run it.
  std::string ladder = "BPF LSM: " + (!f.bpf_lsm.available ? f.bpf_lsm.detail
                                      : !lsm.missing.empty() ? "no hook for " + lsm.missing
                                                             : "a command needs a cgroup v2: " + f.cgroup_v2.detail) +
                       "; kprobe override: " +
                       (f.kprobe_override.available ? std::string("available, but that rung is not wired yet") : f.kprobe_override.detail);
  if (!spec.command.empty()) {
    if (!f.seccomp_notify.available)
      return make_error(ENOTSUP, "no mechanism can fail these syscalls here: " + ladder + "; seccomp user notification: " + f.seccomp_notify.detail);
    return SyscallPlan{SyscallMechanism::SeccompNotify,
                       "seccomp user notification for the wrapped command (" + ladder + ")"};
  }
  std::string which;
  for (const auto& s : spec.syscalls) {
    if (!is_socket_syscall(s)) which += (which.empty() ? "" : ",") + s;
  }
  return make_error(ENOTSUP, "cannot fail " + which + " for " + (spec.pid ? "--pid" : "--cgroup") +
                                 " on this kernel (" + ladder +
                                 "). What works here: the socket syscalls (connect, socket, sendmsg, sendto, bind) for a "
                                 "pid or cgroup" +
                                 (f.bpf_lsm.available ? std::string(", open/openat/creat, execve, read/write (and their "
                                                                    "v/p variants) and unlink/unlinkat through BPF LSM")
                                                      : std::string()) +
                                 ", or any syscall for a command you wrap: faultctl run syscall ... -- COMMAND");
}

int run_syscall_fault(const SyscallFaultSpec& spec, std::ostream& out, std::ostream& err) {
  auto plan = plan_syscall_fault(spec);
  if (!plan) {
    err << "faultctl run syscall: " << plan.error().describe() << "\n";
    return 1;
  }
  if (spec.dry_run) {
    const char* name = plan->mechanism == SyscallMechanism::CgroupSockAddr ? "cgroup"
                       : plan->mechanism == SyscallMechanism::BpfLsm       ? "lsm"
                                                                           : "seccomp";
    if (spec.json) out << nlohmann::json{{"dry_run", true}, {"mechanism", name}, {"why", plan->why}}.dump() << "\n";
    else out << "dry run: would use " << plan->why << "\nnothing was changed.\n";
    return 0;
  }
  switch (plan->mechanism) {
    case SyscallMechanism::CgroupSockAddr:
      return run_cgroup(spec, out, err);
    case SyscallMechanism::BpfLsm:
      return run_lsm(spec, out, err);
    case SyscallMechanism::SeccompNotify:
      break;
  }
  return run_seccomp(spec, out, err);
}

}  // namespace faultline
