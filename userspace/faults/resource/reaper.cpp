// Double fork + setsid, a sleep until the fault is due, an unconditional revert.
#include "userspace/faults/resource/reaper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace {

volatile sig_atomic_t g_reaper_term = 0;
void on_reaper_term(int) { g_reaper_term = 1; }

// Leaves everything faultctl had behind: handlers, blocked signals, terminal,
// working directory (which may be the very mount being filled), descriptors.
void detach_from_faultctl(int keep_fd, const std::string& id) {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    signal(sig, SIG_DFL);
  }
  signal(SIGHUP, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_reaper_term;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  if (::chdir("/") != 0) {
    // "/" always exists; nothing to do but carry on.
  }
  ::umask(077);
  int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    if (null > 2) ::close(null);
  }
  close_fds_except({keep_fd});
  std::string name = "fl-reaper-" + id;
  ::prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
}

[[noreturn]] void reaper_main(const ResourceFaultStore& store, const std::string& id, int ready_fd) {
  detach_from_faultctl(ready_fd, id);
  const pid_t self = ::getpid();
  (void)!::write(ready_fd, &self, sizeof(self));
  ::close(ready_fd);

  int failures = 0;
  for (;;) {
    auto st = store.read(id);
    if (!st) {
      if (st.error().err == ENOENT) ::_exit(0);  // reverted by its owner or by an abort
      if (++failures > 50) ::_exit(1);           // unreadable for 10s: leave it to the sweep
      sleep_ms(200);
      continue;
    }
    // Another live reaper is on record (a sweep re-armed this fault): it takes over.
    // A dead one on record is the predecessor we are replacing.
    if (st->reaper.pid != 0 && st->reaper.pid != self && is_alive(st->reaper)) ::_exit(0);
    const bool owner_alive = is_alive(st->owner);
    const uint64_t due = st->expires_ns + (owner_alive ? st->grace_ns : 0);
    const bool orphaned_apply = st->phase == "applying" && !owner_alive;
    // The kill file reaches a fault whose faultctl is gone too.
    const bool killed = kill_file_present();
    if (g_reaper_term || orphaned_apply || killed || boottime_ns() >= due) {
      std::string why = g_reaper_term    ? "reaper stopped by SIGTERM"
                        : orphaned_apply ? "owner died while applying"
                        : killed         ? "kill file " + kill_file_path()
                                         : "reaper: due";
      auto r = revert_fault(store, id, why);
      if (r) ::_exit(0);
      if (++failures > 10) ::_exit(1);  // revert-failed stays in the state; the sweep retries
      sleep_ms(1000);
      continue;
    }
    sleep_ms(200);
  }
}

}  // namespace

Result<ProcessIdentity> spawn_reaper(const ResourceFaultStore& store, const std::string& id) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return errno_error("cannot create a pipe for the reaper");
  UniqueFd rd(p[0]), wr(p[1]);
  pid_t middle = ::fork();
  if (middle < 0) return errno_error("cannot fork the reaper");
  if (middle == 0) {
    ::setsid();  // own session and process group: no terminal, no group signals from faultctl's shell
    pid_t reaper = ::fork();
    if (reaper == 0) {
      try {
        reaper_main(store, id, wr.get());
      } catch (...) {
        ::_exit(1);
      }
    }
    ::_exit(reaper < 0 ? 1 : 0);  // the reaper is reparented to init (or a subreaper), away from faultctl
  }
  wr.reset();
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  pid_t reaper = 0;
  pollfd pf{rd.get(), POLLIN, 0};
  if (::poll(&pf, 1, 5000) != 1 || ::read(rd.get(), &reaper, sizeof(reaper)) != sizeof(reaper) || reaper <= 0)
    return make_error(ECHILD, "the reaper did not start");
  auto info = read_process(reaper);
  if (!info) return make_error(ECHILD, "the reaper exited at once");
  return info->identity();
}

std::vector<std::string> sweep_resource_faults(const ResourceFaultStore& store) {
  std::vector<std::string> notes;
  const std::string boot = boot_id();
  for (const auto& st : store.list()) {
    const uint64_t now = boottime_ns();
    const bool reaper_alive = is_alive(st.reaper);
    const bool owner_alive = is_alive(st.owner);
    std::string why;
    if (!st.boot_id.empty() && st.boot_id != boot) {
      why = "left over from before a reboot";
    } else if (st.phase == "revert-failed" && !reaper_alive) {
      why = "retrying a failed revert";
    } else if (st.phase == "applying" && !owner_alive && !reaper_alive) {
      why = "its faultctl died while applying it and its reaper is gone";
    } else if (now >= st.expires_ns + (owner_alive ? st.grace_ns : 0) && !reaper_alive) {
      why = "overdue and its reaper is gone";
    } else if (now >= st.expires_ns + st.grace_ns + 10'000'000'000ULL) {
      why = "overdue by more than 10s although its reaper lives";
    }
    if (!why.empty()) {
      auto r = revert_fault(store, st.id, "sweep: " + why);
      if (!r)
        notes.push_back("could not revert fault " + st.id + " (" + st.summary + "), " + why + ": " +
                        r.error().describe());
      else if (*r)
        notes.push_back("reverted fault " + st.id + " (" + st.summary + "): " + why);
      continue;
    }
    // Due later, but nobody left to end it: arm a new deadman.
    if (!reaper_alive && st.reaper.pid != 0 && st.phase == "active") {
      auto lock = store.lock(st.id);
      if (!lock) continue;
      auto fresh = store.read(st.id);
      if (!fresh || is_alive(fresh->reaper)) continue;
      auto reaper = spawn_reaper(store, st.id);
      if (!reaper) {
        notes.push_back("fault " + st.id +
                        " lost its reaper and a new one failed to start: " + reaper.error().describe());
        continue;
      }
      fresh->reaper = *reaper;
      (void)store.write(*fresh);
      notes.push_back("fault " + st.id + " (" + st.summary + ") had lost its reaper; started a new one (pid " +
                      std::to_string(reaper->pid) + ")");
    }
  }
  return notes;
}

}  // namespace faultline
