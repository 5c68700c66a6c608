// systemctl restart without a refused connection, by systemd's documented
// protocols, with this test in the service manager's place: faultd hands its
// listener to the file descriptor store (FDSTORE=1 with the fd, on
// NOTIFY_SOCKET), leaves it listening when it stops, and the next faultd takes
// it back from LISTEN_FDS / LISTEN_FDNAMES. A client that connects while no
// faultd runs waits in the queue and is answered by the next one.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "faultd_env.h"

namespace fldaemon {
namespace {

struct StoredFd {
  std::string message;
  int fd = -1;
};

// One notification, with the descriptor that came with it (if any).
StoredFd next_notification(int sock) {
  StoredFd r;
  pollfd p{sock, POLLIN, 0};
  if (::poll(&p, 1, 10000) <= 0) return r;
  char buf[512];
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(sock, &m, 0);
  if (n <= 0) return r;
  r.message.assign(buf, static_cast<size_t>(n));
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&r.fd, CMSG_DATA(c), sizeof(int));
  }
  return r;
}

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

TEST_F(FaultdTest, ListenersSurviveAStopAndStartThroughTheFdStore) {
  const std::string notify = dir() + "/notify.sock";
  const int sock = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::vector<std::string> e = env();
  e.push_back("NOTIFY_SOCKET=" + notify);
  e.push_back("FDSTORE=8");  // the unit's FileDescriptorStoreMax= (systemd 254+ sets it itself)
  const std::vector<std::string> args = {FAULTD_PATH, "--foreground", "--socket",    socket_path(),
                                         "--metrics", "off",          "--toxiproxy", "off"};

  ChildProcess first = ChildProcess::spawn(args, {.env = e, .stop_grace = 3000ms});
  const StoredFd stored = next_notification(sock);
  EXPECT_EQ(stored.message, "FDSTORE=1\nFDNAME=api") << first.describe();
  ASSERT_GE(stored.fd, 0) << "FDSTORE=1 came without its descriptor";
  struct stat by_fd {};
  ASSERT_EQ(::fstat(stored.fd, &by_fd), 0);
  EXPECT_TRUE(S_ISSOCK(by_fd.st_mode));
  EXPECT_EQ(next_notification(sock).message, "READY=1") << first.describe();
  ASSERT_TRUE(wait_serving(first)) << first.describe();
  EXPECT_NE(first.err().find("listeners kept by the service manager"), std::string::npos) << first.err();

  // Stopped, it leaves the socket listening (held here, as systemd holds it) and its file.
  first.signal(SIGTERM);
  EXPECT_EQ(next_notification(sock).message, "STOPPING=1");
  auto st = first.wait(5000ms);
  ASSERT_TRUE(st && st->is(0)) << first.describe();
  EXPECT_TRUE(std::filesystem::exists(socket_path())) << "the stop removed the kept socket's file";

  // A client between the stop and the start is queued, not refused.
  const int waiting = connect_unix(socket_path());
  ASSERT_GE(waiting, 0) << "refused while no faultd ran: " << std::strerror(errno);
  const std::string req = "GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(waiting, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));

  // The next start gets it as systemd passes the store: fd 3, LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES.
  const std::string start = "exec 3<&" + std::to_string(stored.fd) + "; " + std::to_string(stored.fd) +
                            "<&-; export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=api; exec \"$0\" \"$@\"";
  std::vector<std::string> second_argv = {"bash", "-c", start};
  second_argv.insert(second_argv.end(), args.begin(), args.end());
  ChildProcess second = ChildProcess::spawn(second_argv, {.env = e, .stop_grace = 3000ms});
  ASSERT_TRUE(wait_serving(second)) << second.describe();
  ::close(stored.fd);
  std::string answer;
  char buf[4096];
  for (;;) {
    pollfd p{waiting, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = ::recv(waiting, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(waiting);
  EXPECT_EQ(status_of(answer), 200) << answer << "\n" << second.describe();
  EXPECT_TRUE(second.wait_for("GET /v1/status 200", 5s, fltest::Stream::kStderr)) << second.err();
  // The queued client was answered: the second faultd serves the very socket
  // the first one made (binding anew would have left that client unanswered).
  EXPECT_TRUE(faultctl({"status"}, true).status.is(0));
  second.stop(3000ms);
  ::close(sock);
}

}  // namespace
}  // namespace fldaemon
