// faultd: the host agent. Thin: the settings, detaching (unless --foreground),
// the service manager's notifications and the log; the rest is serve_faultd().
#include "userspace/daemon/faultd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <syslog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "base/exit_code.h"
#include "base/line_writer.h"
#include "base/version.h"
#include "loader/libbpf_log.h"
#include "userspace/daemon/faultd_config.h"

namespace {

using namespace faultline;

// Log lines a foreground faultd keeps waiting for its stderr's reader (about
// a megabyte of request lines), and how long it waits for them at exit.
constexpr size_t kLogBacklog = 16384;
constexpr std::chrono::milliseconds kLogDrain{2000};

// Detached: the parent waits on a pipe until the child serves (it writes its
// exit code there and exits 0) or cannot (a code other than 0, and its log
// line is in syslog); the child runs on in a new session, stdio on /dev/null.
// The listeners systemd passed (LISTEN_FDS, named by FileDescriptorStore's
// FDNAME= when they come from its store); others are closed.
std::map<std::string, int> listeners_from_systemd() {
  std::map<std::string, int> out;
  char** names = nullptr;
  const int n = sd_listen_fds_with_names(1, &names);
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    const std::string name = names != nullptr && names[i] != nullptr ? names[i] : "";
    if ((name == "api" || name == "metrics" || name == "toxiproxy") && out.count(name) == 0 &&
        sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) > 0) {
      (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
      out[name] = fd;
    } else {
      ::close(fd);
    }
  }
  if (names != nullptr) {
    for (int i = 0; i < n; ++i) std::free(names[i]);
    std::free(names);
  }
  return out;
}

// Under systemd with a file descriptor store (FileDescriptorStoreMax=, which
// systemd 254+ announces as $FDSTORE; the unit sets it for older ones), each
// listener is handed to it to keep across a stop and a start.
bool store_listener(const std::string& name, int fd) {
  const char* store = std::getenv("FDSTORE");
  if (std::getenv("NOTIFY_SOCKET") == nullptr || store == nullptr || std::atoi(store) <= 0) return false;
  const std::string msg = "FDSTORE=1\nFDNAME=" + name;
  return sd_pid_notify_with_fds(0, 0, msg.c_str(), &fd, 1) > 0;
}

void notify_handed_over(pid_t successor) {
  // The successor is the service's main process now (systemctl reload).
  (void)sd_notifyf(0, "MAINPID=%d\nREADY=1", int(successor));
}

int detach_and_serve(const FaultdConfig& config, const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    std::cerr << "faultd: pipe: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "faultd: fork: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  if (pid > 0) {
    ::close(pipefd[1]);
    unsigned char code = kExitFailure;
    if (::read(pipefd[0], &code, 1) != 1) code = kExitFailure;
    if (code != 0) std::cerr << "faultd: did not start (see the system log, ident faultd)\n";
    return code;
  }
  ::close(pipefd[0]);
  ::setsid();
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
  }
  ::openlog("faultd", LOG_PID, LOG_DAEMON);
  const int report = pipefd[1];
  FaultdHooks hooks;
  hooks.log = [](const std::string& line) { ::syslog(LOG_INFO, "%s", line.c_str()); };
  hooks.ready = [report](const std::string& where) {
    ::syslog(LOG_INFO, "faultd: serving: %s", where.c_str());
    const unsigned char ok = 0;
    (void)!::write(report, &ok, 1);
    ::close(report);
  };
  hooks.stopping = [] { ::syslog(LOG_INFO, "faultd: stopping"); };
  hooks.argv = argv;
  hooks.handed_over = notify_handed_over;
  hooks.listeners = listeners_from_systemd();
  hooks.store_listener = store_listener;
  const int code = serve_faultd(config, hooks);
  const auto byte = static_cast<unsigned char>(code);
  (void)!::write(report, &byte, 1);  // fails harmlessly once ready closed it
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faultline;
  configure_libbpf_log();
  if (argc == 2 && (std::string(argv[1]) == "version" || std::string(argv[1]) == "--version")) {
    std::cout << "faultd " << version_string() << "\n";
    return kExitCompleted;
  }
  auto args = parse_faultd_args(std::vector<std::string>(argv + 1, argv + argc));
  if (!args) {
    std::cerr << "faultd: " << args.error().describe() << "\n";
    return args.error().bad_input ? kExitBadInput : kExitFailure;
  }
  if (args->help) {
    std::cout << *args->help;
    return kExitCompleted;
  }
  if (::geteuid() != 0) {
    std::cerr << "faultd: needs root (it reads and ends faults in the pinned BPF state)\n";
    return kExitFailure;
  }
  const FaultdConfig& config = args->config;
  const std::vector<std::string> self(argv, argv + argc);
  // A successor (SIGHUP) is already detached, or not, as its predecessor was.
  const bool successor = std::getenv(kFaultdHandoverEnv) != nullptr;
  if (!config.foreground && !successor) return detach_and_serve(config, self);
  FaultdHooks hooks;
  hooks.argv = self;
  hooks.version = version_string();
  hooks.handed_over = notify_handed_over;
  hooks.listeners = listeners_from_systemd();
  hooks.store_listener = store_listener;
  if (!config.foreground) {  // a detached faultd's successor: syslog, as before
    ::openlog("faultd", LOG_PID, LOG_DAEMON);
    hooks.log = [](const std::string& line) { ::syslog(LOG_INFO, "%s", line.c_str()); };
    hooks.ready = [](const std::string& where) {
      ::syslog(LOG_INFO, "faultd: serving: %s", where.c_str());
      (void)sd_notify(0, "READY=1");
    };
    hooks.stopping = [] { ::syslog(LOG_INFO, "faultd: stopping"); };
    return serve_faultd(config, hooks);
  }
  // The request log goes through a thread of its own: a stderr pipe that
  // nobody reads drops lines (counted) rather than stalling the API.
  LineWriter& log = LineWriter::open(STDERR_FILENO, kLogBacklog, "faultd");
  hooks.log = [&log](const std::string& line) { log.post(line); };
  hooks.ready = [&log](const std::string& where) {
    log.post("faultd: serving: " + where);
    // Type=notify: systemd counts the service started from here. Outside
    // systemd (no NOTIFY_SOCKET) this does nothing.
    (void)sd_notify(0, "READY=1");
  };
  hooks.stopping = [&log] {
    (void)sd_notify(0, "STOPPING=1");
    log.post("faultd: stopping");
  };
  const int code = serve_faultd(config, hooks);
  (void)log.drain(kLogDrain);  // a reader that is gone gets no more time than this
  return code;
}
