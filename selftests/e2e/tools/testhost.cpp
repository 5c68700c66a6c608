// fl-testhost: small, predictable traffic endpoints for the e2e tests, the demo and
// the benchmarks. Every sender refuses addresses outside loopback and the
// benchmarking ranges (198.18.0.0/15, 2001:2::/48): it only ever talks to test hosts.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitTimeout = 3;

constexpr const char* kUsage = R"(usage: fl-testhost [--netns NAME] COMMAND ...

servers (print "ready ..." once listening; run until SIGTERM/SIGINT):
  http-server PORT                answer every GET with 200 and a short body
  udp-echo PORT                   send every datagram back
  udp-sink PORT [--expect-payload] [--timeout S] [--idle S] [--list-missing N]
                                  count datagrams; with --expect-payload also
                                  corrupted ones and duplicates; JSON summary at the end;
                                  --list-missing N: which of sequences 0..N-1 never came
  tcp-sink PORT                   accept connections, read and discard
  dns-server PORT [--quiet]       answer any A query with 198.18.0.99 (logs each query)

clients (numeric addresses in 127/8, ::1, 198.18.0.0/15 or 2001:2::/48 only):
  udp-send HOST PORT --count N [--rate R] [--size B] [--seq-start K] [--cpu C]
                                  numbered datagrams with a known pattern; --cpu pins the sender
  tcp-send HOST PORT (--seconds S | --bytes N) [--chunk B] [--timeout S]
                                  write for S seconds, or exactly N bytes, then
                                  half-close and wait (at most --timeout, 30 s)
                                  for the peer to close; JSON summary
  tcp-connect HOST PORT [--timeout S | --timeout-ms MS]
                                  exit 0 connected, 3 timeout, 1 refused/error
  http-get HOST PORT [--count N] [--interval-ms MS] [--timeout-ms MS] [--path P]
                                  GET N times, print each latency; exit 3 if any failed
  dns-query SERVER NAME [--port P] [--timeout S | --timeout-ms MS]
                                  one A query; exit 0 answered, 3 timeout
  udp-watch HOST PORT [--seconds S] [--interval-ms MS] [--timeout-ms MS]
                                  probe a udp-echo and print each outage and recovery

--netns NAME enters /run/netns/NAME (or a path) before anything else.
)";

std::atomic<bool> g_stop{false};

void on_stop(int) { g_stop.store(true); }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

double ms_since(uint64_t start) { return static_cast<double>(mono_ns() - start) / 1e6; }

[[noreturn]] void die(const std::string& msg, int code = kExitError) {
  std::fprintf(stderr, "fl-testhost: %s\n", msg.c_str());
  std::exit(code);
}

[[noreturn]] void die_errno(const std::string& what) { die(what + ": " + std::strerror(errno)); }

// An owned file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  [[nodiscard]] int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Positional arguments and --flag VALUE / --switch options of one command.
class Args {
 public:
  Args(std::vector<std::string> argv, std::vector<std::string> switches) {
    for (size_t i = 0; i < argv.size(); ++i) {
      const std::string& a = argv[i];
      if (a.rfind("--", 0) != 0) {
        pos_.push_back(a);
        continue;
      }
      if (std::find(switches.begin(), switches.end(), a) != switches.end()) {
        flags_.emplace_back(a, "");
        continue;
      }
      if (i + 1 >= argv.size()) die(a + " needs a value", kExitUsage);
      flags_.emplace_back(a, argv[++i]);
    }
  }
  [[nodiscard]] const std::string& pos(size_t i, const char* what) const {
    if (i >= pos_.size()) die(std::string("missing ") + what, kExitUsage);
    return pos_[i];
  }
  [[nodiscard]] bool has(const std::string& f) const {
    return std::any_of(flags_.begin(), flags_.end(), [&](const auto& p) { return p.first == f; });
  }
  [[nodiscard]] std::optional<std::string> get(const std::string& f) const {
    for (const auto& [k, v] : flags_) {
      if (k == f) return v;
    }
    return std::nullopt;
  }
  [[nodiscard]] double num(const std::string& f, double dflt) const {
    auto v = get(f);
    if (!v) return dflt;
    char* end = nullptr;
    double d = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || d < 0)
      die(f + " '" + *v + "': expected a non-negative number", kExitUsage);
    return d;
  }
  // A timeout in ms from --timeout-ms MS or --timeout SECONDS (fractions allowed).
  [[nodiscard]] double timeout_ms(double dflt_ms) const {
    if (has("--timeout")) return num("--timeout", 0) * 1000.0;
    return num("--timeout-ms", dflt_ms);
  }
  // Every flag must be one the command knows: a typo should not pass silently.
  void only(const std::vector<std::string>& known) const {
    for (const auto& [k, v] : flags_) {
      if (std::find(known.begin(), known.end(), k) == known.end()) die("unknown option " + k, kExitUsage);
    }
  }

 private:
  std::vector<std::string> pos_;
  std::vector<std::pair<std::string, std::string>> flags_;
};

uint16_t parse_port(const std::string& s) {
  char* end = nullptr;
  long p = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || p < 1 || p > 65535) die("'" + s + "' is not a port (1-65535)", kExitUsage);
  return static_cast<uint16_t>(p);
}

struct Endpoint {
  sockaddr_storage ss{};
  socklen_t len = 0;
  [[nodiscard]] int family() const { return ss.ss_family; }
  [[nodiscard]] const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&ss); }
};

bool allowed_destination(const Endpoint& e) {
  if (e.family() == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(&e.ss)->sin_addr.s_addr);
    return (a >> 24) == 127 || (a & 0xFFFE0000U) == 0xC6120000U;  // 127/8, 198.18.0.0/15
  }
  const auto* b = reinterpret_cast<const sockaddr_in6*>(&e.ss)->sin6_addr.s6_addr;
  static const uint8_t loop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static const uint8_t bench[6] = {0x20, 0x01, 0x00, 0x02, 0x00, 0x00};  // 2001:2::/48
  return std::memcmp(b, loop, 16) == 0 || std::memcmp(b, bench, 6) == 0;
}

// A numeric address of a test host; names are refused so nothing is ever resolved.
Endpoint destination(const std::string& host, uint16_t port) {
  Endpoint e;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&e.ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&e.ss);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    e.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    e.len = sizeof(sockaddr_in6);
  } else {
    die("'" + host + "' is not a numeric IPv4 or IPv6 address", kExitUsage);
  }
  if (!allowed_destination(e))
    die(host + " is outside loopback and the benchmarking ranges (198.18.0.0/15, 2001:2::/48); refusing to send",
        kExitUsage);
  return e;
}

std::string endpoint_str(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
    return buf;
  }
  const auto& a6 = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {  // an IPv4 client of our dual-stack socket
    inet_ntop(AF_INET, a6.s6_addr + 12, buf, sizeof(buf));
    return buf;
  }
  inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
  return std::string("[") + buf + "]";
}

// Listens on every address of the namespace (IPv6 socket that also takes IPv4).
Fd listen_any(int type, uint16_t port) {
  Fd s(::socket(AF_INET6, type | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  int one = 1, zero = 0;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  a.sin6_port = htons(port);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) die_errno("bind port " + std::to_string(port));
  if (type == SOCK_STREAM && ::listen(s.get(), 512) != 0) die_errno("listen");
  return s;
}

void ready(const char* what, uint16_t port) {
  std::printf("ready %s %u\n", what, port);
  std::fflush(stdout);
}

// A UDP server answers from the address the request was sent to: a host with two
// addresses (198.18.0.2 and .3) must not answer a query to .3 from .2, or a
// connected client drops the answer. The kernel reports the destination
// (IP_PKTINFO / IPV6_PKTINFO) and takes it back as the source of the reply.
class UdpServerSocket {
 public:
  explicit UdpServerSocket(uint16_t port) : fd_(listen_any(SOCK_DGRAM, port)) {
    int one = 1;
    setsockopt(fd_.get(), IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
    setsockopt(fd_.get(), IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
  }
  [[nodiscard]] int fd() const { return fd_.get(); }

  // One datagram (non-blocking); its length, or -1.
  ssize_t receive(uint8_t* buf, size_t len) {
    iovec iov{buf, len};
    msghdr m{};
    m.msg_name = &peer_;
    m.msg_namelen = sizeof(peer_);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control_;
    m.msg_controllen = sizeof(control_);
    ssize_t n = ::recvmsg(fd_.get(), &m, MSG_DONTWAIT);
    peer_len_ = m.msg_namelen;
    have_v4_ = have_v6_ = false;
    if (n < 0) return n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
        std::memcpy(&v4_, CMSG_DATA(c), sizeof(v4_));
        have_v4_ = true;
      } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
        std::memcpy(&v6_, CMSG_DATA(c), sizeof(v6_));
        have_v6_ = true;
      }
    }
    return n;
  }

  // Answers the last datagram's sender, from the address it was sent to.
  void reply(const uint8_t* buf, size_t len) {
    iovec iov{const_cast<uint8_t*>(buf), len};
    alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo))] = {};
    msghdr m{};
    m.msg_name = &peer_;
    m.msg_namelen = peer_len_;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (have_v4_ || have_v6_) {
      m.msg_control = control;
      cmsghdr* c = reinterpret_cast<cmsghdr*>(control);
      if (have_v4_) {
        in_pktinfo pi{};
        pi.ipi_spec_dst = v4_.ipi_addr;
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(pi));
        std::memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        m.msg_controllen = CMSG_SPACE(sizeof(pi));
      } else {
        in6_pktinfo pi{};
        pi.ipi6_addr = v6_.ipi6_addr;
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(pi));
        std::memcpy(CMSG_DATA(c), &pi, sizeof(pi));
        m.msg_controllen = CMSG_SPACE(sizeof(pi));
      }
    }
    (void)::sendmsg(fd_.get(), &m, MSG_DONTWAIT);
  }
  [[nodiscard]] const sockaddr_storage& peer() const { return peer_; }

 private:
  Fd fd_;
  sockaddr_storage peer_{};
  socklen_t peer_len_ = 0;
  alignas(cmsghdr) uint8_t control_[256] = {};
  in_pktinfo v4_{};
  in6_pktinfo v6_{};
  bool have_v4_ = false, have_v6_ = false;
};

// Waits for fd to become readable; false on timeout or a stop signal.
bool wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc = ::poll(&p, 1, timeout_ms);
  return rc == 1;
}

// --- the UDP payload: magic, sequence number, then bytes derived from the sequence.
// Any flipped bit (in the pattern, the magic or the sequence itself) makes the
// datagram inconsistent, so corruption is never mistaken for another number.

constexpr size_t kHeader = 12;
constexpr char kMagic[4] = {'F', 'L', 'T', '1'};

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void fill_pattern(uint64_t seq, uint8_t* p, size_t n) {
  uint64_t state = seq;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = splitmix(state);
    std::memcpy(p + i, &v, std::min<size_t>(8, n - i));
  }
}

std::vector<uint8_t> make_datagram(uint64_t seq, size_t size) {
  std::vector<uint8_t> d(std::max(size, kHeader + 4));
  std::memcpy(d.data(), kMagic, 4);
  for (int i = 0; i < 8; ++i) d[4 + i] = static_cast<uint8_t>(seq >> (56 - 8 * i));
  fill_pattern(seq, d.data() + kHeader, d.size() - kHeader);
  return d;
}

// The sequence number of an intact datagram; nothing if any byte is off.
std::optional<uint64_t> check_datagram(const uint8_t* d, size_t n) {
  if (n < kHeader + 4 || std::memcmp(d, kMagic, 4) != 0) return std::nullopt;
  uint64_t seq = 0;
  for (int i = 0; i < 8; ++i) seq = (seq << 8) | d[4 + i];
  std::vector<uint8_t> want(n - kHeader);
  fill_pattern(seq, want.data(), want.size());
  if (std::memcmp(d + kHeader, want.data(), want.size()) != 0) return std::nullopt;
  return seq;
}

// --- servers

std::string http_response(int code, const std::string& body, bool keep_alive) {
  return "HTTP/1.1 " + std::to_string(code) + (code == 200 ? " OK" : " Bad Request") +
         "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         (keep_alive ? "\r\nConnection: keep-alive" : "\r\nConnection: close") + "\r\n\r\n" + body;
}

bool send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

bool header_says(const std::string& head, const char* name, const char* value) {
  std::string lower = head;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto p = lower.find(std::string("\r\n") + name + ":");
  return p != std::string::npos && lower.find(value, p) < lower.find("\r\n", p + 2);
}

// One connection: requests (GET/HEAD, no body) until the client closes or asks to.
void http_connection(Fd c) {
  timeval tv{10, 0};  // a silent client (say, behind a partition) frees its thread
  setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(c.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int one = 1;
  setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string buf;
  char chunk[4096];
  while (!g_stop.load()) {
    auto end = buf.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (buf.size() > 65536) return;
      ssize_t n = ::recv(c.get(), chunk, sizeof(chunk), 0);
      if (n <= 0) return;
      buf.append(chunk, static_cast<size_t>(n));
      continue;
    }
    std::string head = buf.substr(0, end + 2);
    buf.erase(0, end + 4);
    bool http10 = head.find("HTTP/1.0\r\n") != std::string::npos;
    bool keep = http10 ? header_says(head, "connection", "keep-alive") : !header_says(head, "connection", "close");
    bool get = head.rfind("GET ", 0) == 0 || head.rfind("HEAD ", 0) == 0;
    std::string resp =
        get ? http_response(200, "ok from fl-testhost\n", keep) : http_response(400, "GET only\n", false);
    if (head.rfind("HEAD ", 0) == 0) resp.erase(resp.find("\r\n\r\n") + 4);
    if (!send_all(c.get(), resp) || !keep || !get) return;
  }
}

int http_server(const Args& a) {
  a.only({});
  uint16_t port = parse_port(a.pos(0, "PORT"));
  Fd l = listen_any(SOCK_STREAM, port);
  ready("http-server", port);
  while (!g_stop.load()) {
    if (!wait_readable(l.get(), 200)) continue;
    int c = ::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::thread(http_connection, Fd(c)).detach();
  }
  return kExitOk;
}

int udp_echo(const Args& a) {
  a.only({});
  uint16_t port = parse_port(a.pos(0, "PORT"));
  UdpServerSocket s(port);
  ready("udp-echo", port);
  std::vector<uint8_t> buf(65536);
  while (!g_stop.load()) {
    if (!wait_readable(s.fd(), 200)) continue;
    ssize_t n = s.receive(buf.data(), buf.size());
    if (n >= 0) s.reply(buf.data(), static_cast<size_t>(n));
  }
  return kExitOk;
}

int udp_sink(const Args& a) {
  a.only({"--expect-payload", "--timeout", "--idle", "--list-missing"});
  uint16_t port = parse_port(a.pos(0, "PORT"));
  const bool expect = a.has("--expect-payload");
  const double timeout_s = a.num("--timeout", 0);
  const double idle_s = a.num("--idle", 0);
  Fd s = listen_any(SOCK_DGRAM, port);
  int rcvbuf = 8 << 20;
  setsockopt(s.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  ready("udp-sink", port);
  const uint64_t start = mono_ns();
  uint64_t last = 0;
  uint64_t received = 0, bytes = 0, valid = 0, corrupted = 0, duplicates = 0;
  std::unordered_set<uint64_t> seen;
  std::vector<uint8_t> buf(65536);
  while (!g_stop.load()) {
    uint64_t now = mono_ns();
    if (timeout_s > 0 && now - start >= static_cast<uint64_t>(timeout_s * 1e9)) break;
    if (idle_s > 0 && last != 0 && now - last >= static_cast<uint64_t>(idle_s * 1e9)) break;
    if (!wait_readable(s.get(), 50)) continue;
    for (;;) {
      ssize_t n = ::recv(s.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) break;
      last = mono_ns();
      ++received;
      bytes += static_cast<uint64_t>(n);
      if (!expect) continue;
      auto seq = check_datagram(buf.data(), static_cast<size_t>(n));
      if (!seq) {
        ++corrupted;
        continue;
      }
      ++valid;
      if (!seen.insert(*seq).second) ++duplicates;
    }
  }
  std::printf("{\"received\":%llu,\"bytes\":%llu", static_cast<unsigned long long>(received),
              static_cast<unsigned long long>(bytes));
  if (expect) {
    std::printf(",\"valid\":%llu,\"corrupted\":%llu,\"duplicates\":%llu,\"unique\":%zu",
                static_cast<unsigned long long>(valid), static_cast<unsigned long long>(corrupted),
                static_cast<unsigned long long>(duplicates), seen.size());
    if (a.has("--list-missing")) {
      const auto n = static_cast<uint64_t>(a.num("--list-missing", 0));
      std::printf(",\"missing\":[");
      bool first = true;
      for (uint64_t q = 0; q < n; ++q) {
        if (seen.contains(q)) continue;
        std::printf("%s%llu", first ? "" : ",", static_cast<unsigned long long>(q));
        first = false;
      }
      std::printf("]");
    }
  }
  std::printf("}\n");
  std::fflush(stdout);
  return kExitOk;
}

void tcp_drain(Fd c) {
  char buf[65536];
  while (!g_stop.load()) {
    if (!wait_readable(c.get(), 200)) continue;
    if (::recv(c.get(), buf, sizeof(buf), 0) <= 0) return;
  }
}

int tcp_sink(const Args& a) {
  a.only({});
  uint16_t port = parse_port(a.pos(0, "PORT"));
  Fd l = listen_any(SOCK_STREAM, port);
  ready("tcp-sink", port);
  while (!g_stop.load()) {
    if (!wait_readable(l.get(), 200)) continue;
    int c = ::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) std::thread(tcp_drain, Fd(c)).detach();
  }
  return kExitOk;
}

// --- DNS (RFC 1035 wire format, questions without compression)

constexpr uint8_t kDnsAnswer[4] = {198, 18, 0, 99};

// Reads the question name at off; returns the offset after it, or nothing.
std::optional<size_t> read_qname(const uint8_t* m, size_t n, size_t off, std::string* name) {
  for (int labels = 0; labels < 128; ++labels) {
    if (off >= n) return std::nullopt;
    uint8_t l = m[off];
    if (l == 0) return off + 1;
    if (l > 63 || off + 1 + l > n) return std::nullopt;
    if (name != nullptr) {
      if (!name->empty()) name->push_back('.');
      name->append(reinterpret_cast<const char*>(m + off + 1), l);
    }
    off += 1 + l;
  }
  return std::nullopt;
}

int dns_server(const Args& a) {
  a.only({"--quiet"});
  uint16_t port = parse_port(a.pos(0, "PORT"));
  const bool quiet = a.has("--quiet");
  UdpServerSocket s(port);
  ready("dns-server", port);
  uint8_t q[512];
  while (!g_stop.load()) {
    if (!wait_readable(s.fd(), 200)) continue;
    ssize_t n = s.receive(q, sizeof(q));
    if (n < 12) continue;
    const size_t len = static_cast<size_t>(n);
    if ((q[2] & 0x80) != 0 || ((q[4] << 8) | q[5]) < 1) continue;  // a response, or no question
    std::string name;
    auto end = read_qname(q, len, 12, &name);
    if (!end || *end + 4 > len) continue;
    uint16_t qtype = static_cast<uint16_t>((q[*end] << 8) | q[*end + 1]);
    uint16_t qclass = static_cast<uint16_t>((q[*end + 2] << 8) | q[*end + 3]);
    bool answer = (qtype == 1 || qtype == 255) && qclass == 1;
    std::vector<uint8_t> r(q, q + *end + 4);                   // header and the one question
    r[2] = static_cast<uint8_t>(0x80 | (q[2] & 0x79) | 0x04);  // QR, opcode, AA, RD
    r[3] = 0;                                                  // no RA, NOERROR
    r[4] = 0, r[5] = 1;                                        // QDCOUNT 1
    r[6] = 0, r[7] = answer ? 1 : 0;                           // ANCOUNT
    r[8] = r[9] = r[10] = r[11] = 0;
    if (answer) {
      const uint8_t rr[] = {0xC0, 0x0C, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};  // ->name, A, IN, TTL 60, 4 bytes
      r.insert(r.end(), rr, rr + sizeof(rr));
      r.insert(r.end(), kDnsAnswer, kDnsAnswer + 4);
    }
    s.reply(r.data(), r.size());
    if (!quiet) {
      std::fprintf(stderr, "dns-server: %s type %u from %s -> %s\n", name.c_str(), qtype,
                   endpoint_str(s.peer()).c_str(), answer ? "198.18.0.99" : "no answer (NOERROR)");
    }
  }
  return kExitOk;
}

std::vector<uint8_t> dns_query_packet(uint16_t id, const std::string& name) {
  std::vector<uint8_t> m = {
      static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id), 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
  size_t start = 0;
  while (start < name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    size_t l = dot - start;
    if (l == 0 || l > 63) die("'" + name + "' is not a DNS name", kExitUsage);
    m.push_back(static_cast<uint8_t>(l));
    m.insert(m.end(), name.begin() + static_cast<long>(start), name.begin() + static_cast<long>(dot));
    start = dot + 1;
  }
  m.push_back(0);
  const uint8_t tail[] = {0, 1, 0, 1};  // A, IN
  m.insert(m.end(), tail, tail + 4);
  return m;
}

int dns_query(const Args& a) {
  a.only({"--port", "--timeout-ms", "--timeout"});
  Endpoint server = destination(a.pos(0, "SERVER"), parse_port(a.get("--port").value_or("53")));
  std::string name = a.pos(1, "NAME");
  if (!name.empty() && name.back() == '.') name.pop_back();
  const int timeout_ms = static_cast<int>(a.timeout_ms(1000));
  uint16_t id = 0;
  if (getrandom(&id, sizeof(id), 0) != sizeof(id)) id = static_cast<uint16_t>(mono_ns());
  auto query = dns_query_packet(id, name);
  Fd s(::socket(server.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  if (::connect(s.get(), server.sa(), server.len) != 0) die_errno("connect");
  const uint64_t start = mono_ns();
  if (::send(s.get(), query.data(), query.size(), 0) < 0)
    std::fprintf(stderr, "dns-query: send: %s\n", std::strerror(errno));
  uint8_t r[512];
  for (;;) {
    int left = timeout_ms - static_cast<int>(ms_since(start));
    if (left <= 0 || !wait_readable(s.get(), left)) {
      std::printf("no answer for %s within %d ms\n", name.c_str(), timeout_ms);
      return kExitTimeout;
    }
    ssize_t n = ::recv(s.get(), r, sizeof(r), MSG_DONTWAIT);
    if (n < 12 || ((r[0] << 8) | r[1]) != id || (r[2] & 0x80) == 0) continue;  // ICMP error, stray or bogus
    const size_t len = static_cast<size_t>(n);
    std::string addr = "no A record";
    auto off = read_qname(r, len, 12, nullptr);
    if (off && *off + 4 + 16 <= len && r[7] > 0) {
      size_t rr = *off + 4;
      if ((r[rr] & 0xC0) == 0xC0 && r[rr + 2] == 0 && r[rr + 3] == 1 && r[rr + 10] == 0 && r[rr + 11] == 4) {
        char buf[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, r + rr + 12, buf, sizeof(buf));
        addr = buf;
      }
    }
    std::printf("answered %s: %s (rcode %d) in %.2f ms\n", name.c_str(), addr.c_str(), r[3] & 0x0F, ms_since(start));
    return kExitOk;
  }
}

// --- clients

// Connects within timeout_ms; -1 on timeout, errno value on failure, 0 connected.
int connect_within(const Fd& s, const Endpoint& e, int timeout_ms) {
  int fl = fcntl(s.get(), F_GETFL);
  fcntl(s.get(), F_SETFL, fl | O_NONBLOCK);
  int rc = ::connect(s.get(), e.sa(), e.len);
  if (rc != 0 && errno != EINPROGRESS) return errno;
  if (rc != 0) {
    pollfd p{s.get(), POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return -1;
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return err;
  }
  fcntl(s.get(), F_SETFL, fl);
  return 0;
}

int tcp_connect(const Args& a) {
  a.only({"--timeout-ms", "--timeout"});
  Endpoint e = destination(a.pos(0, "HOST"), parse_port(a.pos(1, "PORT")));
  const int timeout_ms = static_cast<int>(a.timeout_ms(1000));
  Fd s(::socket(e.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  const uint64_t start = mono_ns();
  int rc = connect_within(s, e, timeout_ms);
  if (rc == -1) {
    std::printf("timeout: no connection within %d ms\n", timeout_ms);
    return kExitTimeout;
  }
  if (rc != 0) {
    std::printf("failed: %s\n", std::strerror(rc));
    return kExitError;
  }
  std::printf("connected in %.2f ms\n", ms_since(start));
  return kExitOk;
}

int tcp_send(const Args& a) {
  a.only({"--seconds", "--bytes", "--chunk", "--timeout"});
  Endpoint e = destination(a.pos(0, "HOST"), parse_port(a.pos(1, "PORT")));
  if (a.has("--seconds") == a.has("--bytes")) die("give one of --seconds and --bytes", kExitUsage);
  const double seconds = a.num("--seconds", 0);
  const auto total = static_cast<uint64_t>(a.num("--bytes", 0));
  const double timeout_s = a.num("--timeout", 30);
  const size_t chunk = static_cast<size_t>(std::max(1.0, a.num("--chunk", 1024)));
  Fd s(::socket(e.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  if (int rc = connect_within(s, e, 3000); rc != 0)
    die(rc == -1 ? "connect timed out" : std::string("connect: ") + std::strerror(rc));
  int one = 1;
  setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::string data(chunk, 'x');
  const uint64_t start = mono_ns();
  const uint64_t end = start + static_cast<uint64_t>((a.has("--bytes") ? timeout_s : seconds) * 1e9);
  uint64_t bytes = 0;
  while (!g_stop.load() && mono_ns() < end && (total == 0 || bytes < total)) {
    pollfd p{s.get(), POLLOUT, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    const size_t want = total == 0 ? data.size() : static_cast<size_t>(std::min<uint64_t>(data.size(), total - bytes));
    ssize_t n = ::send(s.get(), data.data(), want, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN) die_errno("send");
    if (n > 0) bytes += static_cast<uint64_t>(n);
    // Small, paced writes: many segments, so loss is measured per packet, not per GSO burst.
    timespec pause{0, 200'000};
    nanosleep(&pause, nullptr);
  }
  if (total != 0) {
    if (bytes < total)
      die("sent " + std::to_string(bytes) + " of " + std::to_string(total) + " bytes in time", kExitTimeout);
    // Half-close and wait for the peer's close: every byte, and our FIN, was
    // delivered and acknowledged by then.
    if (::shutdown(s.get(), SHUT_WR) != 0) die_errno("shutdown");
    char buf[4096];
    for (;;) {
      const uint64_t now = mono_ns();
      if (g_stop.load() || now >= end) die("the peer did not close in time", kExitTimeout);
      if (!wait_readable(s.get(), static_cast<int>(std::min<uint64_t>(200, (end - now) / 1'000'000 + 1)))) continue;
      ssize_t n = ::recv(s.get(), buf, sizeof(buf), 0);
      if (n == 0) break;
      if (n < 0 && errno != EINTR) die_errno("recv");
    }
  }
  std::printf("{\"bytes\":%llu,\"seconds\":%.3f}\n", static_cast<unsigned long long>(bytes), ms_since(start) / 1e3);
  return kExitOk;
}

int udp_send(const Args& a) {
  a.only({"--count", "--rate", "--size", "--seq-start", "--cpu"});
  Endpoint e = destination(a.pos(0, "HOST"), parse_port(a.pos(1, "PORT")));
  if (!a.has("--count")) die("--count is required", kExitUsage);
  const auto count = static_cast<uint64_t>(a.num("--count", 0));
  const double rate = a.num("--rate", 1000);
  const auto size = static_cast<size_t>(a.num("--size", 64));
  const auto first = static_cast<uint64_t>(a.num("--seq-start", 0));
  if (size < kHeader + 4 || size > 60000) die("--size must be within 16-60000", kExitUsage);
  if (a.has("--cpu")) {
    // Egress programs run on the sending CPU: one pinned sender keeps every
    // datagram on one CPU's decision stream (what --seed replays).
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(static_cast<int>(a.num("--cpu", 0)), &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) die_errno("sched_setaffinity");
  }
  Fd s(::socket(e.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  const uint64_t gap = rate > 0 ? static_cast<uint64_t>(1e9 / rate) : 0;
  timespec next{};
  clock_gettime(CLOCK_MONOTONIC, &next);
  uint64_t sent = 0, errors = 0;
  const uint64_t start = mono_ns();
  for (uint64_t i = 0; i < count && !g_stop.load(); ++i) {
    auto d = make_datagram(first + i, size);
    if (::sendto(s.get(), d.data(), d.size(), 0, e.sa(), e.len) == static_cast<ssize_t>(d.size()))
      ++sent;
    else
      ++errors;  // a local drop (ENOBUFS) is what some faults look like to a sender
    if (gap == 0) continue;
    uint64_t ns = static_cast<uint64_t>(next.tv_nsec) + gap;
    next.tv_sec += static_cast<time_t>(ns / 1'000'000'000ULL);
    next.tv_nsec = static_cast<long>(ns % 1'000'000'000ULL);
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
  }
  std::printf("{\"sent\":%llu,\"send_errors\":%llu,\"seconds\":%.3f}\n", static_cast<unsigned long long>(sent),
              static_cast<unsigned long long>(errors), ms_since(start) / 1e3);
  return kExitOk;
}

// One GET; the latency in ms, or nothing with the reason in *why.
std::optional<double> http_get_once(const Endpoint& e, const std::string& host, const std::string& path, int timeout_ms,
                                    std::string* why) {
  const uint64_t start = mono_ns();
  Fd s(::socket(e.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  int rc = connect_within(s, e, timeout_ms);
  if (rc != 0) {
    *why = rc == -1 ? "connect timed out" : std::string("connect: ") + std::strerror(rc);
    return std::nullopt;
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (!send_all(s.get(), req)) {
    *why = std::string("send: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::string resp;
  char buf[4096];
  for (;;) {
    int left = timeout_ms - static_cast<int>(ms_since(start));
    if (left <= 0 || !wait_readable(s.get(), left)) {
      *why = "no complete response within " + std::to_string(timeout_ms) + " ms";
      return std::nullopt;
    }
    ssize_t n = ::recv(s.get(), buf, sizeof(buf), 0);
    if (n < 0) {
      *why = std::string("recv: ") + std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  if (resp.rfind("HTTP/1.1 200", 0) != 0 && resp.rfind("HTTP/1.0 200", 0) != 0) {
    *why = "status line: " + resp.substr(0, resp.find('\r'));
    return std::nullopt;
  }
  return ms_since(start);
}

int http_get(const Args& a) {
  a.only({"--count", "--interval-ms", "--timeout-ms", "--timeout", "--path"});
  const std::string host = a.pos(0, "HOST");
  Endpoint e = destination(host, parse_port(a.pos(1, "PORT")));
  const int count = static_cast<int>(a.num("--count", 1));
  const int interval_ms = static_cast<int>(a.num("--interval-ms", 200));
  const int timeout_ms = static_cast<int>(a.timeout_ms(1000));
  const std::string path = a.get("--path").value_or("/");
  std::vector<double> lat;
  int failed = 0;
  for (int i = 0; i < count && !g_stop.load(); ++i) {
    if (i > 0) usleep(static_cast<useconds_t>(interval_ms) * 1000);
    std::string why;
    auto ms = http_get_once(e, host, path, timeout_ms, &why);
    if (ms) {
      lat.push_back(*ms);
      std::printf("GET http://%s:%s%s -> 200 in %.2f ms\n", host.c_str(), a.pos(1, "PORT").c_str(), path.c_str(), *ms);
    } else {
      ++failed;
      std::printf("GET http://%s:%s%s -> FAILED: %s\n", host.c_str(), a.pos(1, "PORT").c_str(), path.c_str(),
                  why.c_str());
    }
    std::fflush(stdout);
  }
  std::sort(lat.begin(), lat.end());
  double p50 = lat.empty() ? 0 : lat[lat.size() / 2];
  double max = lat.empty() ? 0 : lat.back();
  std::printf("{\"ok\":%zu,\"failed\":%d,\"p50_ms\":%.3f,\"max_ms\":%.3f}\n", lat.size(), failed, p50, max);
  return failed == 0 ? kExitOk : kExitTimeout;
}

// Probes a udp-echo every interval and reports when answers stop and when they resume.
int udp_watch(const Args& a) {
  a.only({"--seconds", "--interval-ms", "--timeout-ms", "--timeout"});
  Endpoint e = destination(a.pos(0, "HOST"), parse_port(a.pos(1, "PORT")));
  const double seconds = a.num("--seconds", 10);
  const auto interval_ns = static_cast<uint64_t>(a.num("--interval-ms", 20) * 1e6);
  const auto timeout_ns = static_cast<uint64_t>(a.timeout_ms(200) * 1e6);
  Fd s(::socket(e.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) die_errno("socket");
  if (::connect(s.get(), e.sa(), e.len) != 0) die_errno("connect");
  const uint64_t start = mono_ns();
  const uint64_t end = start + static_cast<uint64_t>(seconds * 1e9);
  uint64_t seq = 0, answered = 0, next_send = start, last_answer = start, down_since = 0;
  int outages = 0;
  double down_total = 0;
  bool up = true;
  auto t = [&](uint64_t ns) { return static_cast<double>(ns - start) / 1e9; };
  while (!g_stop.load()) {
    uint64_t now = mono_ns();
    if (now >= end) break;
    if (now >= next_send) {
      ++seq;
      ::send(s.get(), &seq, sizeof(seq), MSG_DONTWAIT);
      next_send += interval_ns;
    }
    if (up && now - last_answer > timeout_ns) {
      up = false;
      down_since = last_answer;
      ++outages;
      std::printf("t=%6.2fs  UNREACHABLE (no answer for %llu ms)\n", t(now),
                  static_cast<unsigned long long>((now - last_answer) / 1'000'000));
      std::fflush(stdout);
    }
    uint64_t wait_ns = next_send > now ? next_send - now : 0;
    if (!wait_readable(s.get(), static_cast<int>(wait_ns / 1'000'000))) continue;
    uint64_t got = 0;
    while (::recv(s.get(), &got, sizeof(got), MSG_DONTWAIT) > 0) {
      ++answered;
      last_answer = mono_ns();
      if (!up) {
        up = true;
        double down = static_cast<double>(last_answer - down_since) / 1e9;
        down_total += down;
        std::printf("t=%6.2fs  reachable again (down %.2f s)\n", t(last_answer), down);
        std::fflush(stdout);
      }
    }
  }
  std::printf("{\"probes\":%llu,\"answered\":%llu,\"outages\":%d,\"down_s\":%.2f,\"up_at_end\":%s}\n",
              static_cast<unsigned long long>(seq), static_cast<unsigned long long>(answered), outages, down_total,
              up ? "true" : "false");
  return kExitOk;
}

void enter_netns(const std::string& name) {
  std::string path = name.find('/') == std::string::npos ? "/run/netns/" + name : name;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die_errno("cannot open network namespace " + path);
  if (::setns(fd.get(), CLONE_NEWNET) != 0) die_errno("cannot enter network namespace " + path);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 2 && args[0] == "--netns") {
    enter_netns(args[1]);  // before any thread exists, so every thread is inside
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? kExitUsage : kExitOk;
  }
  install_stop_handlers();
  std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  struct Command {
    const char* name;
    int (*fn)(const Args&);
    std::vector<std::string> switches;
  };
  const Command commands[] = {
      {"http-server", http_server, {}},
      {"udp-echo", udp_echo, {}},
      {"udp-sink", udp_sink, {"--expect-payload"}},
      {"tcp-sink", tcp_sink, {}},
      {"dns-server", dns_server, {"--quiet"}},
      {"udp-send", udp_send, {}},
      {"tcp-send", tcp_send, {}},
      {"tcp-connect", tcp_connect, {}},
      {"http-get", http_get, {}},
      {"dns-query", dns_query, {}},
      {"udp-watch", udp_watch, {}},
  };
  for (const auto& c : commands) {
    if (cmd == c.name) return c.fn(Args(rest, c.switches));
  }
  std::fprintf(stderr, "fl-testhost: unknown command '%s'\n%s", cmd.c_str(), kUsage);
  return kExitUsage;
}
