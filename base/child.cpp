#include "base/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string_view>

namespace faultline {

int exit_code_of_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

Result<HeldChild> HeldChild::spawn(const std::vector<std::string>& argv, std::function<bool()> prepare,
                                   std::string who) {
  if (argv.empty()) return input_error(EINVAL, "no command to run");
  int go[2], execd[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return errno_error("pipe");
  if (::pipe2(execd, O_CLOEXEC) != 0) {
    Error e = errno_error("pipe");
    ::close(go[0]);
    ::close(go[1]);
    return e;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    Error e = errno_error("fork");
    for (int fd : {go[0], go[1], execd[0], execd[1]}) ::close(fd);
    return e;
  }
  if (pid == 0) {
    ::close(go[1]);
    ::close(execd[0]);
    char c;
    if (::read(go[0], &c, 1) != 1) _exit(127);
    ::close(go[0]);
    if (prepare && !prepare()) _exit(127);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "%s: cannot run %s: %s\n", who.c_str(), args[0], std::strerror(errno));
    _exit(127);
  }
  ::close(go[0]);
  ::close(execd[1]);
  return HeldChild(pid, UniqueFd(go[1]), UniqueFd(execd[0]));
}

HeldChild::HeldChild(HeldChild&& o) noexcept
    : pid_(o.pid_), go_(std::move(o.go_)), execd_(std::move(o.execd_)), exit_(o.exit_) {
  o.pid_ = -1;
}

HeldChild::~HeldChild() {
  if (pid_ <= 0 || exit_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

Status HeldChild::release() {
  if (!go_) return {};
  if (::write(go_.get(), "g", 1) != 1) return errno_error("cannot release the command");
  go_.reset();
  char c;
  while (::read(execd_.get(), &c, 1) < 0 && errno == EINTR) {
  }
  execd_.reset();
  return {};
}

std::optional<int> HeldChild::poll_exit() {
  if (exit_ || pid_ <= 0) return exit_;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) exit_ = exit_code_of_status(status);
  return exit_;
}

int HeldChild::wait() {
  if (exit_ || pid_ <= 0) return exit_.value_or(1);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  exit_ = exit_code_of_status(status);
  return *exit_;
}

ChildEnvironment::ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& set) {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : set) replaced = replaced || k == name;
    if (!replaced) entries_.emplace_back(entry);
  }
  for (const auto& [k, v] : set) entries_.push_back(k + "=" + v);
  for (std::string& e : entries_) pointers_.push_back(e.data());
  pointers_.push_back(nullptr);
}

void ChildEnvironment::apply() const { environ = const_cast<char**>(pointers_.data()); }

}  // namespace faultline
