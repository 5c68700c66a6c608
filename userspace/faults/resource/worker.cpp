// fork + PR_SET_PDEATHSIG + a go pipe: a worker that cannot outlive faultctl.
#include "userspace/faults/resource/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace faultline {

Result<Worker> Worker::start(const std::string& name, Body body) {
  int go[2], rep[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return errno_error("cannot create a pipe for a worker");
  UniqueFd go_rd(go[0]), go_wr(go[1]);
  if (::pipe2(rep, O_CLOEXEC) != 0) return errno_error("cannot create a pipe for a worker");
  UniqueFd rep_rd(rep[0]), rep_wr(rep[1]);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return errno_error("cannot fork a worker");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(0);  // faultctl died before the line above took effect
    // Ctrl-C reaches the whole foreground group; faultctl handles it and ends us.
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    close_fds_except({go_rd.get(), rep_wr.get()});
    ::prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
    char c = 0;
    if (::read(go_rd.get(), &c, 1) != 1 || c != 'g') ::_exit(0);  // abandoned before go
    try {
      body(rep_wr.get());
    } catch (...) {
    }
    ::_exit(1);
  }
  go_rd.reset();
  rep_wr.reset();
  auto info = read_process(pid);
  ProcessIdentity id{pid, info ? info->start : 0};
  return Worker(id, std::move(go_wr), std::move(rep_rd));
}

Worker::~Worker() {
  if (id_.pid > 0 && !reaped_) stop();
}

Status Worker::go() {
  char c = 'g';
  if (::write(go_.get(), &c, 1) != 1) return errno_error("cannot start worker " + std::to_string(id_.pid));
  go_.reset();
  return {};
}

Result<char> Worker::wait_report(int timeout_ms) {
  pollfd p{report_.get(), POLLIN, 0};
  int rc = ::poll(&p, 1, timeout_ms);
  if (rc == 0)
    return make_error(ETIMEDOUT, "worker " + std::to_string(id_.pid) + " did not report within " +
                                     std::to_string(timeout_ms / 1000) + "s");
  char c = 0;
  if (rc < 0 || ::read(report_.get(), &c, 1) != 1) {
    std::string how = exited();
    return make_error(ECHILD, "worker " + std::to_string(id_.pid) + " ended before it was ready" +
                                  (how.empty() ? "" : " (" + how + ")"));
  }
  return c;
}

std::string Worker::exited() {
  if (reaped_) return "collected";
  int status = 0;
  pid_t r = ::waitpid(id_.pid, &status, WNOHANG);
  if (r == 0) return "";
  reaped_ = true;
  if (r < 0) return "gone";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

void Worker::stop() {
  if (id_.pid <= 0 || reaped_) return;
  if (is_alive(id_)) ::kill(id_.pid, SIGKILL);
  int status = 0;
  while (::waitpid(id_.pid, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
}

}  // namespace faultline
