// fl-vmprobe: the processes the VM tests fault and watch. `serve` takes one
// operation per line on fd 3 (a socket: a read or write fault must not cut the
// control channel) and answers OK or the errno name; `once` does one operation;
// the rest are traffic endpoints for the packet-fault and redirect tests.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string errname(int e) {
  switch (e) {
    case EACCES:
      return "EACCES";
    case EIO:
      return "EIO";
    case EPERM:
      return "EPERM";
    case ENOENT:
      return "ENOENT";
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case ENOBUFS:
      return "ENOBUFS";
    case ENETUNREACH:
      return "ENETUNREACH";
    case EAGAIN:
      return "EAGAIN";
    case ECONNRESET:
      return "ECONNRESET";
    default:
      return "errno" + std::to_string(e);
  }
}

std::string result(int rc) { return rc == 0 ? "OK" : errname(errno); }

// One file operation; the file name carries no ".so" so the loader skip never applies.
std::string do_op(const std::vector<std::string>& a) {
  const std::string& op = a[0];
  if (op == "pid") return std::to_string(::getpid());
  if (op == "open" && a.size() == 2) {
    int fd = ::open(a[1].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errname(errno);
    ::close(fd);
    return "OK";
  }
  if (op == "openloop" && a.size() == 3) {  // N opens; answers the number that failed
    int n = std::atoi(a[2].c_str()), failed = 0;
    for (int i = 0; i < n; ++i) {
      int fd = ::open(a[1].c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        ++failed;
      else
        ::close(fd);
    }
    return std::to_string(failed);
  }
  if ((op == "read" || op == "write") && a.size() == 2) {
    int fd = ::open(a[1].c_str(), (op == "read" ? O_RDONLY : O_WRONLY | O_APPEND | O_CREAT) | O_CLOEXEC, 0644);
    if (fd < 0) return "open:" + errname(errno);
    char c = 'x';
    ssize_t n = op == "read" ? ::read(fd, &c, 1) : ::write(fd, &c, 1);
    int e = errno;
    ::close(fd);
    return n == 1 ? "OK" : n == 0 ? "EOF" : errname(e);
  }
  if (op == "unlink" && a.size() == 2) {
    int fd = ::open(a[1].c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
    return result(::unlink(a[1].c_str()));
  }
  if (op == "exec" && a.size() >= 2) {  // replaces this process on success
    std::vector<char*> argv;
    for (size_t i = 1; i < a.size(); ++i) argv.push_back(const_cast<char*>(a[i].c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    return errname(errno);
  }
  if (op == "connect" && a.size() == 3) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return "socket:" + errname(errno);
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(static_cast<uint16_t>(std::atoi(a[2].c_str())));
    ::inet_pton(AF_INET, a[1].c_str(), &sin.sin_addr);
    int rc = ::connect(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin));
    int e = errno;
    ::close(s);
    return rc == 0 ? "OK" : errname(e);
  }
  return "BADOP";
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

int serve() {
  std::string buf;
  char chunk[512];
  for (;;) {
    ssize_t n = ::recv(3, chunk, sizeof(chunk), 0);
    if (n <= 0) return 0;
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      auto w = words(buf.substr(0, nl));
      buf.erase(0, nl + 1);
      if (w.empty()) continue;
      if (w[0] == "exit") return 0;
      std::string r = do_op(w) + "\n";
      if (::send(3, r.data(), r.size(), MSG_NOSIGNAL) < 0) return 1;
    }
  }
}

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

sockaddr_in addr(const char* ip, const char* port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  ::inet_pton(AF_INET, ip, &sin.sin_addr);
  return sin;
}

// udp-sink PORT SECONDS: counts datagrams until SECONDS pass with none arriving
// (waits up to a minute for the first one).
int udp_sink(const char* port, const char* secs) {
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sin = addr("0.0.0.0", port);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) return 1;
  std::printf("ready\n");
  std::fflush(stdout);
  long got = 0;
  char b[2048];
  pollfd p{s, POLLIN, 0};
  while (::poll(&p, 1, got == 0 ? 60'000 : std::atoi(secs) * 1000) > 0) {
    if (::recv(s, b, sizeof(b), 0) > 0) ++got;
  }
  std::printf("received %ld\n", got);
  return 0;
}

// udp-send IP PORT COUNT PPS
int udp_send(const char* ip, const char* port, const char* count, const char* pps) {
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sin = addr(ip, port);
  long n = std::atol(count), errors = 0;
  const uint64_t gap = 1'000'000'000ULL / static_cast<uint64_t>(std::atol(pps)), t0 = now_ns();
  char payload[64] = "faultline";
  for (long i = 0; i < n; ++i) {
    while (now_ns() < t0 + static_cast<uint64_t>(i) * gap) ::usleep(200);
    if (::sendto(s, payload, sizeof(payload), 0, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) < 0) ++errors;
  }
  std::printf("sent %ld errors %ld\n", n, errors);
  return 0;
}

// tcp-sink PORT: accepts one connection and reads until EOF.
int tcp_sink(const char* port) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sin = addr("0.0.0.0", port);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0 || ::listen(s, 4) != 0) return 1;
  std::printf("ready\n");
  std::fflush(stdout);
  int c = ::accept(s, nullptr, nullptr);
  static char b[1 << 16];
  long long total = 0;
  for (ssize_t n; (n = ::read(c, b, sizeof(b))) > 0;) total += n;
  std::printf("received %lld\n", total);
  return 0;
}

// tcp-send IP PORT SECONDS: writes as fast as the path allows.
int tcp_send(const char* ip, const char* port, const char* secs) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sin = addr(ip, port);
  if (::connect(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0) return 1;
  static char b[1 << 16];
  const uint64_t end = now_ns() + static_cast<uint64_t>(std::atof(secs) * 1e9);
  long long total = 0;
  while (now_ns() < end) {
    ssize_t n = ::send(s, b, sizeof(b), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
      total += n;
    else
      ::usleep(1000);
  }
  std::printf("sent %lld\n", total);
  return 0;
}

// echo tcp|udp PORT: on 127.0.0.1, answers "pong " + what it got, forever.
int echo(const std::string& proto, const char* port) {
  const bool tcp = proto == "tcp";
  int s = ::socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in sin = addr("127.0.0.1", port);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sin), sizeof(sin)) != 0 || (tcp && ::listen(s, 4) != 0)) return 1;
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;) {
    char b[512] = "pong ";
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    if (tcp) {
      int c = ::accept(s, nullptr, nullptr);
      ssize_t n = ::recv(c, b + 5, sizeof(b) - 5, 0);
      if (n > 0) (void)!::send(c, b, static_cast<size_t>(n) + 5, MSG_NOSIGNAL);
      ::close(c);
    } else {
      ssize_t n = ::recvfrom(s, b + 5, sizeof(b) - 5, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n > 0) (void)!::sendto(s, b, static_cast<size_t>(n) + 5, 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }
}

// peer tcp|udp IP PORT: sends "ping" and prints "peer IP:PORT" (getpeername, TCP)
// or "from IP:PORT" (recvfrom, UDP) and "reply TEXT", or "error ERRNAME".
int peer(const std::string& proto, const char* ip, const char* port) {
  const bool tcp = proto == "tcp";
  int s = ::socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
  timeval tv{3, 0};
  ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in to = addr(ip, port), seen{};
  socklen_t len = sizeof(seen);
  char b[512] = {};
  auto text = [](const sockaddr_in& a) {
    char ipbuf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &a.sin_addr, ipbuf, sizeof(ipbuf));
    return std::string(ipbuf) + ":" + std::to_string(ntohs(a.sin_port));
  };
  ssize_t n;
  if (tcp) {
    if (::connect(s, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
        ::getpeername(s, reinterpret_cast<sockaddr*>(&seen), &len) != 0 || ::send(s, "ping", 4, MSG_NOSIGNAL) != 4) {
      std::printf("error %s\n", errname(errno).c_str());
      return 0;
    }
    n = ::recv(s, b, sizeof(b) - 1, 0);
  } else {
    if (::sendto(s, "ping", 4, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 4) {
      std::printf("error %s\n", errname(errno).c_str());
      return 0;
    }
    n = ::recvfrom(s, b, sizeof(b) - 1, 0, reinterpret_cast<sockaddr*>(&seen), &len);
  }
  if (n <= 0) {
    std::printf("error %s\n", n == 0 ? "EOF" : errname(errno).c_str());
    return 0;
  }
  std::printf("%s %s reply %s\n", tcp ? "peer" : "from", text(seen).c_str(), b);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 1 && a[0] == "serve") return serve();
  if (a.size() >= 2 && a[0] == "once") {
    std::string r = do_op(std::vector<std::string>(a.begin() + 1, a.end()));
    std::fprintf(stderr, "%s\n", r.c_str());
    return r == "OK" ? 0 : 1;
  }
  if (a.size() == 3 && a[0] == "udp-sink") return udp_sink(argv[2], argv[3]);
  if (a.size() == 5 && a[0] == "udp-send") return udp_send(argv[2], argv[3], argv[4], argv[5]);
  if (a.size() == 2 && a[0] == "tcp-sink") return tcp_sink(argv[2]);
  if (a.size() == 4 && a[0] == "tcp-send") return tcp_send(argv[2], argv[3], argv[4]);
  if (a.size() == 3 && a[0] == "echo") return echo(a[1], argv[3]);
  if (a.size() == 4 && a[0] == "peer") return peer(a[1], argv[3], argv[4]);
  std::fprintf(stderr,
               "usage: fl-vmprobe serve (ops on fd 3) | once OP ARGS | udp-sink PORT S | udp-send IP PORT N PPS |\n"
               "       tcp-sink PORT | tcp-send IP PORT S | echo tcp|udp PORT | peer tcp|udp IP PORT\n"
               "ops: open P, openloop P N, read P, write P, unlink P, exec PATH ARGS, connect IP PORT, pid\n");
  return 2;
}
