// fl_probe: the enforcement tests' client. It makes socket and file syscalls and
// prints, per action, how many calls succeeded and which errno each failure got.
//
// Linked statically and printing with writev() only, so that a seccomp fault on
// read, write or openat hits the calls it counts and nothing else (no dynamic
// loader, no stdio).
//
//   fl_probe [--netns NAME] ACTION ARGS [ACTION ARGS]...
//     connect tcp|udp ADDR PORT N   N x (socket, connect, close)
//     sendto ADDR PORT N            N unconnected UDP datagrams (one byte each)
//     fastopen ADDR PORT N          N x TCP sendto(MSG_FASTOPEN): a connect without connect()
//     bind tcp|udp ADDR N           N x (socket, bind to ADDR port 0, close)
//     socket tcp|udp|tcp6|udp6|unix N
//     open PATH N | read PATH N | write PATH N
//     udpflood ADDR PORT SIZE COUNT COUNT datagrams of SIZE bytes, paced
//     udpconnflood ADDR PORT SIZE COUNT  the same on a connected socket
//     tcpstream ADDR PORT SECONDS KBPS  one connection, writes for SECONDS at
//                                   KBPS kilobytes/s (0: as fast as it goes)
//     tcpsink PORT                  accepts on every address, drains, forever
//     wait                          prints WAITING, then waits for a line on stdin
//     hold                          prints HOLD, then waits for stdin to close
//     sleep MS                      sleeps MS milliseconds (calls before and after a delayed start)
//     trace                         from here on, each action also prints its answers in order
//     resolveconnect RESOLVER PORT N PIN NAME...
//                                   N rounds of, for each NAME: empty the pinned map
//                                   PIN (learned addresses; "-" for none), ask RESOLVER
//                                   (port 53, UDP) for NAME's A record, connect TCP to
//                                   its first address at PORT at once, close. Labels
//                                   "resolve NAME" and "connect NAME"
//
// Each action prints "RESULT <label> <ok or ERRNAME>:<count>..." (names sorted);
// after `trace`, also "TRACE <label> <ok or ERRNAME>,..." (one per call, in order).
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

void say(const std::string& line) {
  std::string s = line + "\n";
  iovec v{s.data(), s.size()};
  while (v.iov_len > 0) {
    ssize_t n = ::writev(STDOUT_FILENO, &v, 1);
    if (n <= 0) return;
    v.iov_base = static_cast<char*>(v.iov_base) + n;
    v.iov_len -= static_cast<size_t>(n);
  }
}

[[noreturn]] void die(const std::string& why) {
  std::string s = "fl_probe: " + why + "\n";
  iovec v{s.data(), s.size()};
  (void)::writev(STDERR_FILENO, &v, 1);
  _exit(100);
}

std::string errname(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : "E" + std::to_string(e);
}

bool g_trace = false;  // the `trace` action: print each action's answers in order

class Tally {
 public:
  void ok() { note("ok"); }
  void fail(int e) { note(errname(e)); }
  void print(const std::string& label) const {
    std::string line = "RESULT " + label;
    for (const auto& [k, v] : counts_) line += " " + k + ":" + std::to_string(v);
    say(line);
    if (g_trace) say("TRACE " + label + " " + trace_);
  }

 private:
  void note(const std::string& what) {
    counts_[what]++;
    trace_ += (trace_.empty() ? "" : ",") + what;
  }
  std::map<std::string, long> counts_;
  std::string trace_;
};

struct Endpoint {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
};

Endpoint endpoint(const std::string& addr, const std::string& port) {
  Endpoint e;
  int p = std::atoi(port.c_str());
  if (p < 0 || p > 65535) die("bad port " + port);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&e.ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&e.ss);
  if (inet_pton(AF_INET, addr.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(p));
    e.len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, addr.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(p));
    e.len = sizeof(*v6);
    e.family = AF_INET6;
  } else {
    die("bad address " + addr);
  }
  return e;
}

std::string label_of(const std::string& addr, const std::string& port) {
  return addr.find(':') != std::string::npos ? "[" + addr + "]:" + port : addr + ":" + port;
}

long count_arg(const std::string& s) {
  char* end = nullptr;
  long n = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || n < 0) die("bad count " + s);
  return n;
}

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Every key of a pinned BPF hash map with 16-byte keys, deleted (raw bpf(2):
// this binary links no libbpf).
void empty_pinned_map(const std::string& pin) {
  bpf_attr get{};
  get.pathname = reinterpret_cast<uint64_t>(pin.c_str());
  const int fd = static_cast<int>(::syscall(__NR_bpf, BPF_OBJ_GET, &get, sizeof(get)));
  if (fd < 0) die("cannot open the pinned map " + pin + ": " + errname(errno));
  unsigned char key[16];
  for (;;) {
    bpf_attr next{};
    next.map_fd = static_cast<uint32_t>(fd);
    next.key = 0;
    next.next_key = reinterpret_cast<uint64_t>(key);
    if (::syscall(__NR_bpf, BPF_MAP_GET_NEXT_KEY, &next, sizeof(next)) != 0) break;
    bpf_attr del{};
    del.map_fd = static_cast<uint32_t>(fd);
    del.key = reinterpret_cast<uint64_t>(key);
    if (::syscall(__NR_bpf, BPF_MAP_DELETE_ELEM, &del, sizeof(del)) != 0) break;
  }
  ::close(fd);
}

// One A query on a connected UDP socket; the first A record's address, or an errno.
int resolve_a(const Endpoint& resolver, const std::string& name, in_addr* out) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&resolver.ss), resolver.len) != 0) {
    int e = errno;
    ::close(fd);
    return e;
  }
  static uint16_t id = 1;
  std::vector<uint8_t> q = {static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id), 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  ++id;
  size_t start = 0;
  for (size_t i = 0; i <= name.size(); ++i) {
    if (i == name.size() || name[i] == '.') {
      q.push_back(static_cast<uint8_t>(i - start));
      q.insert(q.end(), name.begin() + static_cast<long>(start), name.begin() + static_cast<long>(i));
      start = i + 1;
    }
  }
  q.insert(q.end(), {0, 0, 1, 0, 1});
  if (::send(fd, q.data(), q.size(), 0) != static_cast<ssize_t>(q.size())) {
    int e = errno;
    ::close(fd);
    return e;
  }
  uint8_t r[1500];
  ssize_t n = ::recv(fd, r, sizeof(r), 0);
  int e = errno;
  ::close(fd);
  if (n < 0) return e;
  // Skip the question (as sent), then walk the answers for the first A.
  size_t off = q.size();
  const unsigned an = (static_cast<unsigned>(r[6]) << 8) | r[7];
  for (unsigned i = 0; i < an; ++i) {
    while (off < static_cast<size_t>(n) && r[off] != 0 && (r[off] & 0xc0) != 0xc0) off += r[off] + 1u;
    off += off < static_cast<size_t>(n) && r[off] == 0 ? 1 : 2;
    if (off + 10 > static_cast<size_t>(n)) break;
    const unsigned type = (static_cast<unsigned>(r[off]) << 8) | r[off + 1];
    const unsigned rdlen = (static_cast<unsigned>(r[off + 8]) << 8) | r[off + 9];
    off += 10;
    if (off + rdlen > static_cast<size_t>(n)) break;
    if (type == 1 && rdlen == 4) {
      std::memcpy(out, r + off, 4);
      return 0;
    }
    off += rdlen;
  }
  return ENODATA;
}

void do_resolveconnect(const std::string& resolver, const std::string& port, long n, const std::string& pin,
                       const std::vector<std::string>& names) {
  const Endpoint dns = endpoint(resolver, "53");
  std::vector<Tally> resolved(names.size()), connected(names.size());
  for (long round = 0; round < n; ++round) {
    for (size_t k = 0; k < names.size(); ++k) {
      if (pin != "-") empty_pinned_map(pin);
      in_addr a{};
      if (int e = resolve_a(dns, names[k], &a); e != 0) {
        resolved[k].fail(e);
        continue;
      }
      resolved[k].ok();
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_addr = a;
      to.sin_port = htons(static_cast<uint16_t>(std::atoi(port.c_str())));
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) die("socket: " + errname(errno));
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0)
        connected[k].ok();
      else
        connected[k].fail(errno);
      ::close(fd);
    }
  }
  for (size_t k = 0; k < names.size(); ++k) {
    resolved[k].print("resolve " + names[k]);
    connected[k].print("connect " + names[k]);
  }
}

void do_connect(const std::string& proto, const std::string& addr, const std::string& port, long n) {
  Endpoint e = endpoint(addr, port);
  int type = proto == "udp" ? SOCK_DGRAM : SOCK_STREAM;
  Tally t;
  for (long i = 0; i < n; ++i) {
    int fd = ::socket(e.family, type | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: " + errname(errno));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&e.ss), e.len) == 0)
      t.ok();
    else
      t.fail(errno);
    ::close(fd);
  }
  t.print(proto + " " + label_of(addr, port));
}

void do_sendto(const std::string& addr, const std::string& port, long n) {
  Endpoint e = endpoint(addr, port);
  int fd = ::socket(e.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: " + errname(errno));
  Tally t;
  for (long i = 0; i < n; ++i) {
    if (::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&e.ss), e.len) == 1)
      t.ok();
    else
      t.fail(errno);
  }
  ::close(fd);
  t.print("sendto " + label_of(addr, port));
}

void do_fastopen(const std::string& addr, const std::string& port, long n) {
  Endpoint e = endpoint(addr, port);
  Tally t;
  for (long i = 0; i < n; ++i) {
    int fd = ::socket(e.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: " + errname(errno));
    if (::sendto(fd, "x", 1, MSG_FASTOPEN | MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&e.ss), e.len) >= 0)
      t.ok();
    else
      t.fail(errno);
    ::close(fd);
  }
  t.print("fastopen " + label_of(addr, port));
}

void do_bind(const std::string& proto, const std::string& addr, long n) {
  Endpoint e = endpoint(addr, "0");
  Tally t;
  for (long i = 0; i < n; ++i) {
    int fd = ::socket(e.family, (proto == "udp" ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket: " + errname(errno));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&e.ss), e.len) == 0)
      t.ok();
    else
      t.fail(errno);
    ::close(fd);
  }
  t.print("bind" + proto + " " + label_of(addr, "0"));
}

void do_socket(const std::string& kind, long n) {
  int family = kind == "unix" ? AF_UNIX : (kind == "tcp6" || kind == "udp6") ? AF_INET6 : AF_INET;
  int type = (kind == "udp" || kind == "udp6") ? SOCK_DGRAM : SOCK_STREAM;
  Tally t;
  for (long i = 0; i < n; ++i) {
    int fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      t.ok();
      ::close(fd);
    } else {
      t.fail(errno);
    }
  }
  t.print("socket " + kind);
}

void do_file(const std::string& op, const std::string& path, long n) {
  Tally t;
  if (op == "open") {
    for (long i = 0; i < n; ++i) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        t.ok();
        ::close(fd);
      } else {
        t.fail(errno);
      }
    }
  } else {
    int fd = ::open(path.c_str(), (op == "read" ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
    if (fd < 0) die("open " + path + ": " + errname(errno));
    char c = 'x';
    for (long i = 0; i < n; ++i) {
      ssize_t r = op == "read" ? ::read(fd, &c, 1) : ::write(fd, &c, 1);
      if (r >= 0)
        t.ok();
      else
        t.fail(errno);
      if (op == "read") ::lseek(fd, 0, SEEK_SET);
    }
    ::close(fd);
  }
  t.print(op + " " + path);
}

void do_udpflood(const std::string& addr, const std::string& port, long size, long count, bool connected) {
  Endpoint e = endpoint(addr, port);
  int fd = ::socket(e.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: " + errname(errno));
  const std::string label = (connected ? "udpconnflood " : "udpflood ") + label_of(addr, port);
  Tally t;
  if (connected && ::connect(fd, reinterpret_cast<sockaddr*>(&e.ss), e.len) != 0) {
    t.fail(errno);
    t.print(label);
    ::close(fd);
    return;
  }
  std::string payload(static_cast<size_t>(size), 'p');
  for (long i = 0; i < count; ++i) {
    ssize_t n = connected ? ::send(fd, payload.data(), payload.size(), 0)
                          : ::sendto(fd, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&e.ss), e.len);
    if (n == static_cast<ssize_t>(payload.size()))
      t.ok();
    else
      t.fail(errno);
    ::usleep(500);  // the receiver must never drop for want of buffer
  }
  ::close(fd);
  t.print(label);
}

void do_tcpstream(const std::string& addr, const std::string& port, double seconds, long kbps) {
  Endpoint e = endpoint(addr, port);
  int fd = ::socket(e.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: " + errname(errno));
  timeval tv{0, 200'000};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  Tally t;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&e.ss), e.len) != 0) {
    t.fail(errno);
    t.print("tcpstream " + label_of(addr, port));
    ::close(fd);
    return;
  }
  say("STREAMING");
  // Paced, a stream on a clean path retransmits nothing; flat out, a busy
  // 2-vCPU machine drops at the veth backlog and it does.
  std::string chunk(kbps > 0 ? 4096 : 16384, 's');
  long long sent = 0;
  const double start = now_s(), end = start + seconds;
  while (now_s() < end) {
    ssize_t w = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (w > 0)
      sent += w;
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      break;
    if (kbps > 0) {
      double ahead = static_cast<double>(sent) / (static_cast<double>(kbps) * 1000.0) - (now_s() - start);
      if (ahead > 0) ::usleep(static_cast<useconds_t>(ahead * 1e6));
    }
  }
  ::close(fd);
  t.ok();
  t.print("tcpstream " + label_of(addr, port));
  say("SENT " + std::to_string(sent));
}

[[noreturn]] void do_tcpsink(const std::string& port) {
  int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: " + errname(errno));
  int zero = 0, one = 1;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(static_cast<uint16_t>(std::atoi(port.c_str())));
  a.sin6_addr = in6addr_any;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) die("bind: " + errname(errno));
  if (::listen(fd, 1024) != 0) die("listen: " + errname(errno));
  say("LISTENING " + port);
  ::signal(SIGCHLD, SIG_IGN);
  for (;;) {
    int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    if (::fork() == 0) {
      char buf[65536];
      while (::recv(c, buf, sizeof(buf), 0) > 0) {
      }
      _exit(0);
    }
    ::close(c);
  }
}

void join_netns(const std::string& name) {
  std::string path = "/run/netns/" + name;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("open " + path + ": " + errname(errno));
  if (::setns(fd, CLONE_NEWNET) != 0) die("setns " + name + ": " + errname(errno));
  ::close(fd);
}

// Reads stdin with readv, so a fault on read() does not touch it.
bool stdin_line() {
  char c;
  iovec v{&c, 1};
  for (;;) {
    ssize_t n = ::readv(STDIN_FILENO, &v, 1);
    if (n <= 0) return false;
    if (c == '\n') return true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  size_t i = 0;
  auto need = [&](size_t k) {
    if (i + k > a.size()) die("action " + a[i - 1] + " needs " + std::to_string(k) + " arguments");
  };
  if (i + 1 < a.size() && a[i] == "--netns") {
    join_netns(a[i + 1]);
    i += 2;
  }
  if (i >= a.size()) die("no action (see the comment at the top of fl_probe.cpp)");
  while (i < a.size()) {
    const std::string act = a[i++];
    if (act == "resolveconnect") {
      need(4);
      const std::string resolver = a[i], port = a[i + 1], pin = a[i + 3];
      const long n = count_arg(a[i + 2]);
      i += 4;
      std::vector<std::string> names;
      while (i < a.size() && a[i].find('.') != std::string::npos) names.push_back(a[i++]);
      if (names.empty()) die("resolveconnect needs at least one NAME");
      do_resolveconnect(resolver, port, n, pin, names);
    } else if (act == "connect") {
      need(4);
      do_connect(a[i], a[i + 1], a[i + 2], count_arg(a[i + 3]));
      i += 4;
    } else if (act == "sendto") {
      need(3);
      do_sendto(a[i], a[i + 1], count_arg(a[i + 2]));
      i += 3;
    } else if (act == "fastopen") {
      need(3);
      do_fastopen(a[i], a[i + 1], count_arg(a[i + 2]));
      i += 3;
    } else if (act == "bind") {
      need(3);
      do_bind(a[i], a[i + 1], count_arg(a[i + 2]));
      i += 3;
    } else if (act == "socket") {
      need(2);
      do_socket(a[i], count_arg(a[i + 1]));
      i += 2;
    } else if (act == "open" || act == "read" || act == "write") {
      need(2);
      do_file(act, a[i], count_arg(a[i + 1]));
      i += 2;
    } else if (act == "udpflood" || act == "udpconnflood") {
      need(4);
      do_udpflood(a[i], a[i + 1], count_arg(a[i + 2]), count_arg(a[i + 3]), act == "udpconnflood");
      i += 4;
    } else if (act == "tcpstream") {
      need(4);
      do_tcpstream(a[i], a[i + 1], std::atof(a[i + 2].c_str()), count_arg(a[i + 3]));
      i += 4;
    } else if (act == "tcpsink") {
      need(1);
      do_tcpsink(a[i]);
    } else if (act == "trace") {
      g_trace = true;
    } else if (act == "wait") {
      say("WAITING");
      if (!stdin_line()) die("stdin closed while waiting");
    } else if (act == "sleep") {
      need(1);
      const long ms = count_arg(a[i]);
      timespec ts{ms / 1000, (ms % 1000) * 1'000'000L};
      while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
      i += 1;
    } else if (act == "hold") {
      say("HOLD");
      while (stdin_line()) {
      }
    } else {
      die("unknown action " + act);
    }
  }
  return 0;
}
