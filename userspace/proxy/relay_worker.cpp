// The relay: accept, connect upstream, then per direction a pipe that receives
// chunks, runs each through the active toxics (delays as io_uring timeouts) and
// sends it. A direction reads ahead only a few chunks (one with plain receive):
// a slow reader stops reads from the other side, and memory stays bounded. A
// connection of a proxy in HTTP mode goes through an HttpSession instead of
// the stream toxics (pump_http). With TLS on (HttpRules::tls) the client's
// first bytes are scanned for a ClientHello first (pump_hello): a TLS
// connection is then faulted by its SNI and relayed untouched, or terminated
// (TlsTermination between the sockets and the HttpSession, tls_* below). A
// forward proxy's connection has no upstream until its first request is
// judged: the target is resolved (numeric at once, names on a resolver
// thread) and connected, then the request goes on as in HTTP mode, or a
// CONNECT becomes a tunnel (forward_* below).
#include "userspace/proxy/relay_worker.h"

#include <arpa/inet.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "userspace/proxy/http_answer.h"
#include "userspace/proxy/http_session.h"
#include "userspace/proxy/proxy_request.h"
#include "userspace/proxy/tls_client_hello.h"
#include "userspace/proxy/tls_termination.h"

namespace faultline {
// Named, not anonymous: RelayWorker::Loop (declared in the header) holds these.
namespace relay {

// The client of a connection for the attempt counter: its address without the
// port (a retry may come on a new connection); "" when the socket cannot say.
std::string relay_peer_host(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  char buf[INET6_ADDRSTRLEN] = {};
  const void* addr = ss.ss_family == AF_INET6
                         ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                         : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  if (::inet_ntop(ss.ss_family, addr, buf, sizeof buf) == nullptr) return {};
  return buf;
}

uint64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ULL + uint64_t(ts.tv_nsec);
}

enum class OpKind : uint8_t {
  wake,
  accept,
  accept_retry,
  connect,
  recv,
  recv_retry,
  send,
  timer,
  deadline,
  http_head,
  slow_open
};

// One kind of request an object can have in flight (at most one of each), and the
// user_data of its completions. A cancel request carries user_data 0.
struct Op {
  OpKind kind;
  void* owner = nullptr;
  bool pending = false;
  __kernel_timespec ts{};  // read by the kernel at submission of a timeout
};

struct Connection;
struct ProxyState;

// Bytes received and not yet sent: one receive's worth, in a buffer of the ring
// (bid) or the pipe's own.
struct Chunk {
  char* data = nullptr;
  uint32_t len = 0;
  int32_t bid = -1;  // the provided buffer held, -1 for none
  uint64_t arrived_ns = 0;
};

// With a buffer ring a direction reads ahead up to this many chunks while the
// first waits out its delay (latency counts from each chunk's arrival, so a bulk
// transfer under latency is not cut to one buffer per delay); with plain
// receive it holds one, in its own buffer.
constexpr uint8_t kRingChunksInFlight = 4;

struct Pipe {
  Connection* conn = nullptr;
  Stream stream = Stream::upstream;
  std::array<Chunk, kRingChunksInFlight> chunks{};  // a ring: head, then count-1 more
  uint8_t head = 0;
  uint8_t count = 0;
  uint32_t off = 0;             // what of the head chunk is sent
  std::unique_ptr<char[]> own;  // plain receive mode only
  bool eof = false;
  bool shut = false;
  bool latency_done = false;
  bool slow_close_done = false;
  bool deadline_cancelling = false;
  uint64_t sent = 0;
  uint64_t bw_next_ns = 0;
  const ToxicSet* seen = nullptr;
  DirectionPlan plan;
  uint64_t armed_key = 0;
  uint64_t deadline_at = 0;
  bool deadline_reset = false;
  Op recv_op{OpKind::recv};
  Op retry_op{OpKind::recv_retry};  // a receive that found the ring empty, again in 1 ms
  Op send_op{OpKind::send};
  Op timer_op{OpKind::timer};
  Op deadline_op{OpKind::deadline};
  // HTTP mode: bytes of the head chunk to send before the session is asked
  // again; bytes of the proxy's own to send first (a request head upstream, an
  // answer downstream); close once the budget is sent (a cut response).
  size_t budget = 0;
  std::string out;
  size_t out_off = 0;
  bool sending_out = false;
  bool out_is_answer = false;
  bool close_after_budget = false;
  // Terminated TLS: the plaintext read from this pipe's source (the session's
  // input), and the records owed to its destination; a send of plaintext is
  // counted as sent (owed_plain) once its records are. fin_after_wire: the
  // destination gets its FIN once the records before it are out.
  std::string plain;
  size_t plain_off = 0;
  std::string wire;
  size_t wire_off = 0;
  size_t owed_plain = 0;
  bool fin_after_wire = false;
};

// With TLS on: where a connection stands before its first byte is judged.
enum class Hello : uint8_t {
  none,        // judged (or TLS is off): the connection is HTTP, a stream, or terminated
  reading,     // the client's first bytes are held and scanned
  delaying,    // a TLS connection not terminated, held by an SNI delay fault
  judging,     // a forward proxy's tunnel: its SNI waits for the judge's verdict
  connecting,  // a redirected connection let through: its upstream is being connected
};

// What a redirected connection to a forward proxy becomes once its upstream
// (its original destination) is connected.
enum class Transparent : uint8_t {
  off,        // not redirected (a client of the forward proxy), or not yet known
  http,       // plain HTTP: each request judged by its Host
  stream,     // neither HTTP nor TLS: judged once by address and port, then relayed
  sni,        // TLS not terminated: judged by its SNI, then relayed
  terminate,  // TLS terminated: each inner request judged
};

// What a forward proxy's connection waits for (nothing while it relays).
// body: the request's body is being read for RequestJudge::judge_body.
enum class Await : uint8_t { none, verdict, resolve, connect, body };

// Request ids are unique in the process (every worker, every proxy).
std::atomic<uint64_t> g_next_request_id{1};

// getaddrinfo off the workers' threads: one thread per worker, started at the
// first name (numeric hosts never come here), answering through `done` (which
// posts to the worker). Joined when the worker goes.
class NameResolver {
 public:
  using Done = std::function<void(Result<SocketAddress>)>;
  ~NameResolver() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void resolve(std::string host, uint16_t port, Done done) {
    {
      std::lock_guard lock(mu_);
      work_.push_back({std::move(host), port, std::move(done)});
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    }
    cv_.notify_one();
  }

 private:
  struct Job {
    std::string host;
    uint16_t port;
    Done done;
  };
  void run() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !work_.empty(); });
        if (stop_) return;
        job = std::move(work_.front());
        work_.pop_front();
      }
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* res = nullptr;
      const std::string port = std::to_string(job.port);
      const int rc = ::getaddrinfo(job.host.c_str(), port.c_str(), &hints, &res);
      if (rc != 0 || res == nullptr) {
        job.done(make_error(0, "cannot resolve " + job.host + ": " + ::gai_strerror(rc)));
        continue;
      }
      SocketAddress a;
      std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
      a.length = res->ai_addrlen;
      ::freeaddrinfo(res);
      job.done(a);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> work_;
  bool stop_ = false;
  std::thread thread_;
};

// The proxy's own answers in forward mode: plain text naming what is wrong.
std::string forward_text_answer(int status, const std::string& text, HeaderList extra = {}) {
  extra.emplace_back("Content-Type", "text/plain");
  return compose_http_response(status, extra, text + "\n", false);
}

// Proxy-Authorization as configured: the scheme without case, the rest exact
// (compared in constant time).
bool forward_credentials_ok(std::string_view want, std::string_view got) {
  const size_t ws = want.find(' ');
  const size_t gs = got.find(' ');
  if (ws == std::string_view::npos || gs == std::string_view::npos || ws != gs) return false;
  for (size_t i = 0; i < ws; ++i)
    if (std::tolower(static_cast<unsigned char>(want[i])) != std::tolower(static_cast<unsigned char>(got[i])))
      return false;
  std::string_view a = want.substr(ws + 1);
  std::string_view b = got.substr(gs + 1);
  while (!b.empty() && b.front() == ' ') b.remove_prefix(1);
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

struct Connection {
  ProxyState* proxy = nullptr;
  UniqueFd client;
  UniqueFd server;
  std::optional<SocketAddress> upstream;  // transparent: where the client asked to go
  Pipe up;                                // client -> server
  Pipe down;                              // server -> client
  uint64_t seed = 0;
  uint64_t accepted_ns = 0;  // first_n counts connections accepted after its toxic came
  bool connected = false;
  bool closing = false;
  Op connect_op{OpKind::connect};
  Op open_op{OpKind::slow_open};       // slow_open: the upstream connect waits
  std::unique_ptr<HttpSession> http;   // HTTP mode
  Op http_head_op{OpKind::http_head};  // the request-head clock (408)
  uint64_t head_serial = 0;
  uint64_t head_deadline_ns = 0;
  Hello hello = Hello::none;
  std::string held;  // the client's first bytes while scanned (then a chunk of their own)
  size_t hello_wanted = 0;
  std::unique_ptr<TlsTermination> tls;  // terminated
  bool tls_failure_counted = false;
  std::string sni;  // the ClientHello's, once parsed (pass-through)
  // A forward proxy's connection (ProxyRoute::judge).
  bool forward = false;
  Transparent transparent = Transparent::off;
  bool redirected = false;    // the kernel redirected it here: c.target is its original destination
  std::string identity;       // who authenticated (ProxyRoute::authenticate), for the tunnel's later heads
  SocketAddress peer;         // the client
  Await await = Await::none;  // request_id names what is awaited
  uint64_t request_id = 0;
  std::optional<ProxyTarget> target;  // where the upstream is (or is being) connected
  bool connect_request = false;       // the request awaited is a CONNECT
  bool inner = false;                 // c.http reads the requests inside a CONNECT tunnel
  UniqueFd connecting;                // the upstream socket until its connect completes
  bool observe_wanted = false;        // the forward verdict asked to see the response
  uint64_t observe_id = 0;            // a response the judge asked to see
  uint64_t observe_serial = 0;
  // The forward verdict's response transformer: wanted until the request goes
  // on, then applied to that exchange's response.
  std::shared_ptr<ByteTransformer> response_wanted;
  std::shared_ptr<ByteTransformer> response_tf;
  uint64_t response_tf_serial = 0;
  Connection* prev = nullptr;
  Connection* next = nullptr;

  [[nodiscard]] int src(const Pipe& p) const { return &p == &up ? client.get() : server.get(); }
  [[nodiscard]] int dst(const Pipe& p) const { return &p == &up ? server.get() : client.get(); }
  [[nodiscard]] Pipe& other(const Pipe& p) { return &p == &up ? down : up; }
  [[nodiscard]] bool any_pending() const {
    for (const Pipe* p : {&up, &down})
      if (p->recv_op.pending || p->retry_op.pending || p->send_op.pending || p->timer_op.pending ||
          p->deadline_op.pending)
        return true;
    return connect_op.pending || http_head_op.pending || open_op.pending;
  }
};

struct Listener {
  ProxyState* proxy = nullptr;
  UniqueFd fd;
  bool closing = false;
  bool released = false;  // handed to a successor: what is still accepted is relayed
  Op accept_op{OpKind::accept};
  Op retry_op{OpKind::accept_retry};
};

struct ProxyState {
  uint64_t id = 0;
  ProxyRoute route;
  std::shared_ptr<const ToxicSet> toxics;
  std::shared_ptr<ProxyCounters> counters;
  Listener* listener = nullptr;
  Connection* connections = nullptr;  // intrusive list
  bool stopping = false;
};

void set_int_opt(int fd, int level, int opt, int value) { (void)::setsockopt(fd, level, opt, &value, sizeof value); }

void set_linger_zero(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

}  // namespace relay

using namespace relay;

class RelayWorker::Loop {
 public:
  explicit Loop(const WorkerConfig& config) : config_(config) {}
  ~Loop() {
    if (inbox_) inbox_->close();
    resolver_.reset();
    teardown();
  }

  Status init() {
    io_uring_params params{};
    params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
    if (io_uring_queue_init_params(config_.ring_entries, &ring_, &params) < 0) {
      params = {};
      if (int rc = io_uring_queue_init_params(config_.ring_entries, &ring_, &params); rc < 0)
        return make_error(-rc, "io_uring_queue_init");
    }
    ring_ready_ = true;
    wake_fd_.reset(::eventfd(0, EFD_CLOEXEC));
    if (!wake_fd_) return errno_error("eventfd");
    if (config_.buffer_ring) FL_TRY(setup_buffer_ring());
    // Verdicts on held requests come back through the command queue, so the
    // eventfd the ring always watches wakes the worker: no polling, no timer.
    inbox_ = std::make_shared<HeldVerdictInbox>([this](uint64_t id, RequestVerdict v) {
      post([id, v = std::move(v)](Loop& l) mutable { l.on_held_verdict(id, std::move(v)); });
    });
    return {};
  }

  void post(std::function<void(Loop&)> fn) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(fn));
    }
    uint64_t one = 1;
    (void)!::write(wake_fd_.get(), &one, sizeof one);
  }

  void run() {
    arm_wake();
    while (!(stopping_ && proxies_.empty() && live_ == 0)) {
      int rc = io_uring_submit_and_wait(&ring_, 1);
      if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) break;
      unsigned head = 0;
      unsigned count = 0;
      io_uring_cqe* cqe = nullptr;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        ++count;
        dispatch(cqe->user_data, cqe->res, cqe->flags);
      }
      io_uring_cq_advance(&ring_, count);
      bury_the_dead();
    }
    // The eventfd read is the last request: cancel it and see it end, so that the
    // kernel holds nothing of ours when the ring goes.
    if (wake_op_.pending) {
      io_uring_prep_cancel64(sqe(), reinterpret_cast<uint64_t>(&wake_op_), 0);
      while (wake_op_.pending) {
        io_uring_cqe* cqe = nullptr;
        if (io_uring_submit_and_wait(&ring_, 1) < 0 || io_uring_peek_cqe(&ring_, &cqe) != 0) break;
        if (cqe->user_data == reinterpret_cast<uint64_t>(&wake_op_)) wake_op_.pending = false;
        io_uring_cqe_seen(&ring_, cqe);
      }
    }
  }

  // Commands (run on the worker's thread).
  void start_proxy(uint64_t id, UniqueFd fd, ProxyRoute route, std::shared_ptr<const ToxicSet> toxics,
                   std::shared_ptr<ProxyCounters> counters) {
    auto* ps = new ProxyState{id, std::move(route), std::move(toxics), std::move(counters)};
    proxies_[id] = ps;
    auto* l = new Listener{ps, std::move(fd)};
    ps->listener = l;
    arm_accept(*l);
  }

  void stop_proxy(uint64_t id) {
    auto it = proxies_.find(id);
    if (it == proxies_.end()) return;
    ProxyState* ps = it->second;
    proxies_.erase(it);
    if (Listener* l = ps->listener) {
      l->closing = true;
      // shutdown() ends the listening state now (new connections are refused at
      // once); the accept request completes with an error and frees the listener.
      (void)::shutdown(l->fd.get(), SHUT_RDWR);
      cancel(l->accept_op);
      cancel(l->retry_op);
      maybe_free(*l);
    }
    for (Connection* c = ps->connections; c != nullptr;) {
      Connection* next = c->next;
      close(*c, false);
      c = next;
    }
    ps->stopping = true;
    maybe_free(ps);
  }

  // Stops accepting on the proxy's listener without shutdown(): a successor holds
  // the same socket and accepts from now on. Connections stay.
  void release_listener(uint64_t id) {
    auto it = proxies_.find(id);
    if (it == proxies_.end()) return;
    if (Listener* l = it->second->listener) {
      l->closing = true;
      l->released = true;
      cancel(l->accept_op);
      cancel(l->retry_op);
      maybe_free(*l);
    }
  }

  void set_toxics(uint64_t id, std::shared_ptr<const ToxicSet> toxics) {
    auto it = proxies_.find(id);
    if (it == proxies_.end()) return;
    it->second->toxics = std::move(toxics);
    for (Connection* c = it->second->connections; c != nullptr;) {
      Connection* next = c->next;
      if (c->connected && !c->closing) {
        toxics_changed(c->up);
        if (!c->closing) toxics_changed(c->down);
      } else if (c->open_op.pending) {
        cancel(c->open_op);  // slow_open: its delay is judged again (on_open_delay)
      }
      c = next;
    }
  }

  void stop_all() {
    stopping_ = true;
    std::vector<uint64_t> ids;
    for (const auto& [id, ps] : proxies_) ids.push_back(id);
    for (uint64_t id : ids) stop_proxy(id);
  }

 private:
  Status setup_buffer_ring() {
    uint32_t n = config_.ring_buffers;
    if (n == 0 || (n & (n - 1)) != 0 || n > 32768)
      return input_error(EINVAL, "ring_buffers must be a power of two up to 32768");
    br_bytes_ = (size_t(n) * sizeof(io_uring_buf) + 4095) & ~size_t(4095);
    void* ring_mem = ::mmap(nullptr, br_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (ring_mem == MAP_FAILED) return errno_error("mmap buffer ring");
    br_ = static_cast<io_uring_buf_ring*>(ring_mem);
    // The buffers: untouched pages cost no memory, so idle workers stay small.
    buffers_bytes_ = size_t(n) * config_.buffer_size;
    void* bufs = ::mmap(nullptr, buffers_bytes_, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (bufs == MAP_FAILED) return errno_error("mmap receive buffers");
    buffers_ = static_cast<char*>(bufs);
    io_uring_buf_ring_init(br_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(br_);
    reg.ring_entries = n;
    reg.bgid = kBufferGroup;
    if (int rc = io_uring_register_buf_ring(&ring_, &reg, 0); rc < 0)
      return make_error(-rc, "io_uring_register_buf_ring");
    int mask = io_uring_buf_ring_mask(n);
    for (uint32_t i = 0; i < n; ++i)
      io_uring_buf_ring_add(br_, buffers_ + size_t(i) * config_.buffer_size, config_.buffer_size, i, mask, int(i));
    io_uring_buf_ring_advance(br_, int(n));
    return {};
  }

  void recycle(int32_t bid) {
    io_uring_buf_ring_add(br_, buffers_ + size_t(bid) * config_.buffer_size, config_.buffer_size, bid,
                          io_uring_buf_ring_mask(config_.ring_buffers), 0);
    io_uring_buf_ring_advance(br_, 1);
  }

  void teardown() {
    if (ring_ready_) io_uring_queue_exit(&ring_);
    ring_ready_ = false;
    if (br_ != nullptr) ::munmap(br_, br_bytes_);
    if (buffers_ != nullptr) ::munmap(buffers_, buffers_bytes_);
    br_ = nullptr;
    buffers_ = nullptr;
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    while (s == nullptr) {
      (void)io_uring_submit(&ring_);
      s = io_uring_get_sqe(&ring_);
    }
    return s;
  }

  void submit_op(io_uring_sqe* s, Op& op) {
    op.pending = true;
    io_uring_sqe_set_data(s, &op);
  }

  void cancel(Op& op) {
    if (!op.pending) return;
    io_uring_sqe* s = sqe();
    io_uring_prep_cancel64(s, reinterpret_cast<uint64_t>(&op), 0);
    io_uring_sqe_set_data64(s, 0);
  }

  void arm_timer_at(Op& op, uint64_t at_ns) {
    op.ts.tv_sec = int64_t(at_ns / 1'000'000'000ULL);
    op.ts.tv_nsec = int64_t(at_ns % 1'000'000'000ULL);
    io_uring_sqe* s = sqe();
    io_uring_prep_timeout(s, &op.ts, 0, IORING_TIMEOUT_ABS);
    submit_op(s, op);
  }

  void arm_wake() {
    io_uring_sqe* s = sqe();
    io_uring_prep_read(s, wake_fd_.get(), &wake_value_, sizeof wake_value_, 0);
    submit_op(s, wake_op_);
  }

  void on_wake(int res) {
    wake_op_.pending = false;
    if (res == -ECANCELED) return;
    std::vector<std::function<void(Loop&)>> work;
    {
      std::lock_guard lock(mu_);
      work.swap(queue_);
    }
    for (auto& fn : work) fn(*this);
    // Armed until the very end, even after stop_all(): run() cancels it last.
    arm_wake();
  }

  void dispatch(uint64_t user_data, int res, uint32_t flags) {
    if (user_data == 0) return;  // a cancel request's own completion
    Op& op = *reinterpret_cast<Op*>(user_data);
    switch (op.kind) {
      case OpKind::wake:
        on_wake(res);
        break;
      case OpKind::accept:
        on_accept(*static_cast<Listener*>(op.owner), res, flags);
        break;
      case OpKind::accept_retry: {
        auto& l = *static_cast<Listener*>(op.owner);
        l.retry_op.pending = false;
        if (l.closing)
          maybe_free(l);
        else
          arm_accept(l);
        break;
      }
      case OpKind::connect:
        on_connect(*static_cast<Connection*>(op.owner), res);
        break;
      case OpKind::recv:
        on_recv(*static_cast<Pipe*>(op.owner), res, flags);
        break;
      case OpKind::recv_retry:
        on_timer(*static_cast<Pipe*>(op.owner), static_cast<Pipe*>(op.owner)->retry_op);
        break;
      case OpKind::send:
        on_send(*static_cast<Pipe*>(op.owner), res);
        break;
      case OpKind::timer:
        on_timer(*static_cast<Pipe*>(op.owner), static_cast<Pipe*>(op.owner)->timer_op);
        break;
      case OpKind::deadline:
        on_deadline(*static_cast<Pipe*>(op.owner), res);
        break;
      case OpKind::http_head:
        on_head_clock(*static_cast<Connection*>(op.owner));
        break;
      case OpKind::slow_open:
        on_open_delay(*static_cast<Connection*>(op.owner));
        break;
    }
  }

  // --- accept and connect ---------------------------------------------------

  void arm_accept(Listener& l) {
    l.accept_op.owner = &l;
    l.retry_op.owner = &l;
    io_uring_sqe* s = sqe();
    if (config_.multishot_accept)
      io_uring_prep_multishot_accept(s, l.fd.get(), nullptr, nullptr, SOCK_CLOEXEC);
    else
      io_uring_prep_accept(s, l.fd.get(), nullptr, nullptr, SOCK_CLOEXEC);
    submit_op(s, l.accept_op);
  }

  void on_accept(Listener& l, int res, uint32_t flags) {
    bool more = (flags & IORING_CQE_F_MORE) != 0;
    if (!more) l.accept_op.pending = false;
    if (res >= 0) {
      if (l.closing && !l.released)
        ::close(res);
      else
        new_connection(*l.proxy, res);
    }
    if (more) return;
    if (l.closing) {
      maybe_free(l);
      return;
    }
    // Out of descriptors or memory: try again shortly rather than spin.
    if (res == -EMFILE || res == -ENFILE || res == -ENOBUFS || res == -ENOMEM) {
      arm_timer_at(l.retry_op, now_ns() + 10'000'000);
      return;
    }
    arm_accept(l);
  }

  void maybe_free(Listener& l) {
    if (l.accept_op.pending || l.retry_op.pending) return;
    ProxyState* ps = l.proxy;
    ps->listener = nullptr;
    delete &l;
    maybe_free(ps);
  }

  void maybe_free(ProxyState* ps) {
    if (!ps->stopping || ps->listener != nullptr || ps->connections != nullptr) return;
    dead_proxies_.push_back(ps);
  }

  // What was freed during a batch of completions goes at its end: a caller up the
  // stack (a loop over a proxy's connections, a toxic change visiting both
  // directions) may still hold the pointer.
  void bury_the_dead() {
    for (Connection* c : dead_connections_) delete c;  // closes both sockets
    live_ -= dead_connections_.size();
    dead_connections_.clear();
    for (ProxyState* ps : dead_proxies_) delete ps;
    dead_proxies_.clear();
  }

  void new_connection(ProxyState& ps, int fd) {
    auto* c = new Connection;
    ++live_;
    c->proxy = &ps;
    c->client.reset(fd);
    c->seed = splitmix64(rng_state_ += 0x9e3779b97f4a7c15ULL);
    c->accepted_ns = now_ns();
    for (Pipe* p : {&c->up, &c->down}) {
      p->conn = c;
      p->recv_op.owner = p->retry_op.owner = p->send_op.owner = p->timer_op.owner = p->deadline_op.owner = p;
    }
    c->down.stream = Stream::downstream;
    c->connect_op.owner = c;
    c->http_head_op.owner = c;
    c->open_op.owner = c;
    if (ps.toxics->http || ps.route.judge) {
      c->http = std::make_unique<HttpSession>(ps.toxics->http ? ps.toxics->http->upstream_host : "", c->seed);
      c->http->set_client(relay_peer_host(fd));
      // (A proxy of its own TLS with a plain listener reads no hello: its TLS
      // is towards the upstream alone, begun on connect.)
      const HttpTls* tls = ps.toxics->http ? &ps.toxics->http->tls : nullptr;
      if (tls && tls->mode != HttpTlsMode::off && !ps.route.judge && (tls->mode != HttpTlsMode::own || tls->server))
        c->hello = Hello::reading;
    }
    c->next = ps.connections;
    if (ps.connections != nullptr) ps.connections->prev = c;
    ps.connections = c;
    ps.counters->accepted.fetch_add(1, std::memory_order_relaxed);
    ps.counters->active.fetch_add(1, std::memory_order_relaxed);
    set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    if (ps.route.judge) {  // a forward proxy: the first request names the upstream
      c->forward = true;
      c->connected = true;
      c->peer.length = sizeof c->peer.storage;
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&c->peer.storage), &c->peer.length) != 0) c->peer = {};
      c->http->judge_requests();
      if (!config_.buffer_ring) {
        c->up.own.reset(new char[config_.buffer_size]);
        c->down.own.reset(new char[config_.buffer_size]);
      }
      // Redirected by the kernel: where it goes is known, what it is is not
      // yet (HTTP, TLS or anything else: its first bytes tell).
      if (ps.route.original_destination) {
        if (auto dest = ps.route.original_destination(fd)) {
          c->redirected = true;
          c->upstream = *dest;
          c->target = ProxyTarget{"http", address_only(*dest), port_of(*dest), ""};
          c->hello = Hello::reading;
        }
      }
      pump(c->up);
      return;
    }
    if (ps.route.original_destination) {
      c->upstream = ps.route.original_destination(fd);
      if (!c->upstream) {
        ps.counters->unrouted.fetch_add(1, std::memory_order_relaxed);
        close(*c, true);
        return;
      }
    } else if (!ps.route.upstream_unusable.empty()) {
      upstream_lost(*c, ps.counters->upstream_unresolved, ps.route.upstream_unusable);
      return;
    } else if (!ps.route.upstream_host.empty()) {
      resolve_upstream(*c);
      return;
    } else {
      c->upstream = ps.route.upstream;
    }
    connect_upstream(*c);
  }

  // A named upstream, per connection as Toxiproxy dials it: the connection
  // waits (its client's bytes stay in the kernel) until the name resolves.
  void resolve_upstream(Connection& c) {
    const uint64_t id = g_next_request_id.fetch_add(1, std::memory_order_relaxed);
    c.request_id = id;
    c.await = Await::resolve;
    awaiting_[id] = &c;
    if (!resolver_) resolver_ = std::make_unique<NameResolver>();
    resolver_->resolve(c.proxy->route.upstream_host, c.proxy->route.upstream_port, [this, id](Result<SocketAddress> r) {
      post([id, r = std::move(r)](Loop& l) mutable { l.on_resolved(id, std::move(r)); });
    });
  }

  void connect_upstream(Connection& c) {
    // slow_open: the connect waits out the delay from the accept (the plans
    // are folded now, so a first_n slot is taken by this connection's open).
    refresh_plan(c.up);
    refresh_plan(c.down);
    const int64_t delay_ms = std::max(c.up.plan.open_delay_ms, c.down.plan.open_delay_ms);
    if (delay_ms > 0) {
      const uint64_t due = c.accepted_ns + uint64_t(delay_ms) * 1'000'000ULL;
      if (due > now_ns()) {
        if (!c.open_op.pending) arm_timer_at(c.open_op, due);
        return;
      }
    }
    const SocketAddress& to = *c.upstream;
    c.server.reset(::socket(to.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!c.server) {
      upstream_lost(c, c.proxy->counters->upstream_unreachable,
                    "cannot reach " + endpoint_text(to) + ": socket: " + std::strerror(errno));
      return;
    }
    set_int_opt(c.server.get(), IPPROTO_TCP, TCP_NODELAY, 1);
    if (c.proxy->route.mark != 0) set_int_opt(c.server.get(), SOL_SOCKET, SO_MARK, int(c.proxy->route.mark));
    io_uring_sqe* s = sqe();
    io_uring_prep_connect(s, c.server.get(), to.get(), to.length);
    submit_op(s, c.connect_op);
  }

  // The slow_open clock ended, or the toxics changed while it ran (the delay
  // is judged again under the new set: removing the toxic releases it).
  void on_open_delay(Connection& c) {
    c.open_op.pending = false;
    if (c.closing) {
      maybe_free(c);
      return;
    }
    connect_upstream(c);
  }

  // The client was accepted and its upstream cannot be had: it is closed (a
  // FIN, as Toxiproxy closes it), counted, and the reason kept for the log.
  void upstream_lost(Connection& c, std::atomic<uint64_t>& counter, std::string why) {
    c.proxy->counters->upstream_failed(counter, std::move(why));
    close(c, false);
  }

  void on_connect(Connection& c, int res) {
    c.connect_op.pending = false;
    if (c.closing) {
      maybe_free(c);
      return;
    }
    if (c.forward) {
      on_forward_connect(c, res);
      return;
    }
    if (res < 0) {  // the upstream refused or is unreachable: the client is closed
      upstream_lost(c, c.proxy->counters->upstream_unreachable,
                    "cannot reach " + (c.upstream ? endpoint_text(*c.upstream) : c.proxy->route.upstream_host) + ": " +
                        std::strerror(-res));
      return;
    }
    c.connected = true;
    if (!config_.buffer_ring) {
      c.up.own.reset(new char[config_.buffer_size]);
      c.down.own.reset(new char[config_.buffer_size]);
    }
    // A plain client of a proxy whose upstream is TLS: the upstream's
    // handshake begins now; the client's plaintext waits for it.
    const HttpTls& tls = http_rules(c).tls;
    if (c.http && tls.mode == HttpTlsMode::own && !tls.server && tls.client && !c.tls)
      c.tls = std::make_unique<TlsTermination>(nullptr, tls.client, "", tls.upstream_name);
    for (Pipe* p : {&c.up, &c.down}) {
      if (c.closing) break;
      refresh_plan(*p);
      sync_deadline(*p);
      if (!c.tls) pump(*p);
    }
    if (c.tls && !c.closing) {
      (void)c.tls->upstream_connected();  // a failure is the phase: tls_after sends the client why
      tls_after(c);
    }
  }

  // --- closing --------------------------------------------------------------

  // Closes both sides: with an RST (SO_LINGER 0) when `reset`, else a FIN. The
  // connection is freed when its last request has completed.
  void close(Connection& c, bool reset) {
    if (c.closing) return;
    c.closing = true;
    if (c.await != Await::none) {  // a held request's client went away: the judge drops it
      awaiting_.erase(c.request_id);
      if (c.await == Await::verdict || c.await == Await::body) c.proxy->route.judge->withdrawn(c.request_id);
      c.await = Await::none;
    }
    end_observation(c);
    // A forward verdict whose response was to be observed, closed before the
    // upstream answered (still resolving or connecting): the judge learns that
    // no response came, so what it reserved for the call is released.
    if (std::exchange(c.observe_wanted, false)) c.proxy->route.judge->on_response_bytes(c.request_id, {}, true);
    if (reset) {
      set_linger_zero(c.client.get());
      set_linger_zero(c.server.get());
    }
    cancel(c.connect_op);
    cancel(c.http_head_op);
    cancel(c.open_op);
    for (Pipe* p : {&c.up, &c.down}) {
      cancel(p->recv_op);
      cancel(p->retry_op);
      cancel(p->send_op);
      cancel(p->timer_op);
      cancel(p->deadline_op);
    }
    maybe_free(c);
  }

  void maybe_free(Connection& c) {
    if (!c.closing || c.any_pending()) return;
    for (Pipe* p : {&c.up, &c.down})
      while (p->count > 0) pop_chunk(*p);
    ProxyState* ps = c.proxy;
    if (c.prev != nullptr)
      c.prev->next = c.next;
    else
      ps->connections = c.next;
    if (c.next != nullptr) c.next->prev = c.prev;
    c.prev = c.next = nullptr;
    ps->counters->active.fetch_sub(1, std::memory_order_relaxed);
    dead_connections_.push_back(&c);
    maybe_free(ps);
  }

  // --- toxics ---------------------------------------------------------------

  // Folds the proxy's current toxic set into the pipe's plan when the set changed
  // since the pipe last looked (a pointer comparison per chunk).
  void refresh_plan(Pipe& p) {
    const ToxicSet* set = p.conn->proxy->toxics.get();
    if (set == p.seen) return;
    p.seen = set;
    p.plan = plan_direction(*set, p.stream, p.conn->seed, p.plan, p.conn->accepted_ns);
  }

  void toxics_changed(Pipe& p) {
    refresh_plan(p);
    // A chunk waiting out a delay is judged again under the new toxics (an HTTP
    // connection's delays are its faults', decided per request: they stay).
    if (p.timer_op.pending && !p.conn->http && p.conn->hello == Hello::none) {
      if (p.off == 0) p.latency_done = false;
      cancel(p.timer_op);
    }
    sync_deadline(p);
    pump(p);
  }

  // reset_peer and timeout run a clock per connection and direction from when the
  // toxic first applies to it; a changed toxic (new version) starts it again.
  void sync_deadline(Pipe& p) {
    Connection& c = *p.conn;
    if (c.closing) return;
    uint64_t want = p.plan.deadline_key;
    if (p.deadline_op.pending) {
      if (p.armed_key != want && !p.deadline_cancelling) {
        p.deadline_cancelling = true;
        cancel(p.deadline_op);
      }
      return;
    }
    if (want == 0) {
      p.armed_key = 0;
      return;
    }
    uint64_t now = now_ns();
    if (p.armed_key != want) {
      p.armed_key = want;
      p.deadline_at = now + uint64_t(p.plan.deadline_ms) * 1'000'000ULL;
      p.deadline_reset = p.plan.deadline_reset;
    }
    if (p.deadline_at <= now) {
      close(c, p.deadline_reset);
      return;
    }
    arm_timer_at(p.deadline_op, p.deadline_at);
  }

  void on_deadline(Pipe& p, int res) {
    p.deadline_op.pending = false;
    p.deadline_cancelling = false;
    Connection& c = *p.conn;
    if (c.closing) {
      maybe_free(c);
      return;
    }
    if (res == -ETIME && p.armed_key != 0 && p.armed_key == p.plan.deadline_key) {
      close(c, p.deadline_reset);
      return;
    }
    sync_deadline(p);
  }

  // --- the data path --------------------------------------------------------

  void arm_recv(Pipe& p) {
    Connection& c = *p.conn;
    io_uring_sqe* s = sqe();
    if (config_.buffer_ring) {
      io_uring_prep_recv(s, c.src(p), nullptr, config_.buffer_size, 0);
      s->flags |= IOSQE_BUFFER_SELECT;
      s->buf_group = kBufferGroup;
    } else {
      io_uring_prep_recv(s, c.src(p), p.own.get(), config_.buffer_size, 0);
    }
    submit_op(s, p.recv_op);
  }

  void on_recv(Pipe& p, int res, uint32_t flags) {
    p.recv_op.pending = false;
    Connection& c = *p.conn;
    int32_t bid = (flags & IORING_CQE_F_BUFFER) ? int32_t(flags >> IORING_CQE_BUFFER_SHIFT) : -1;
    if (c.closing || res <= 0) {
      if (bid >= 0) recycle(bid);
    }
    if (c.closing) {
      maybe_free(c);
      return;
    }
    if (res == -ENOBUFS) {  // every provided buffer is in use: try again in 1 ms
      c.proxy->counters->ring_empty.fetch_add(1, std::memory_order_relaxed);
      arm_timer_at(p.retry_op, now_ns() + 1'000'000);
      return;
    }
    if (res < 0) {  // ECONNRESET and the like: the other side gets an RST too
      close(c, true);
      return;
    }
    if (res == 0) {
      p.eof = true;
      if (c.tls) {
        if (&p == &c.up)
          c.tls->client_eof();
        else
          c.tls->upstream_eof();
        tls_after(c);
        return;
      }
      pump(p);
      return;
    }
    Chunk& chunk = p.chunks[(p.head + p.count) % kRingChunksInFlight];
    chunk.data = bid >= 0 ? buffers_ + size_t(bid) * config_.buffer_size : p.own.get();
    chunk.len = uint32_t(res);
    chunk.bid = bid;
    chunk.arrived_ns = now_ns();
    ++p.count;
    if (c.tls) {
      tls_in(p);
      return;
    }
    pump(p);
  }

  // The head chunk is sent (or dropped with its connection): its buffer goes back.
  void pop_chunk(Pipe& p) {
    Chunk& chunk = p.chunks[p.head];
    if (chunk.bid >= 0) recycle(chunk.bid);
    chunk = Chunk{};
    p.head = uint8_t((p.head + 1) % kRingChunksInFlight);
    --p.count;
    p.off = 0;
    p.latency_done = false;
  }

  int64_t uniform(int64_t lo, int64_t hi) {  // [lo, hi]
    if (hi <= lo) return lo;
    rng_state_ += 0x9e3779b97f4a7c15ULL;
    return lo + int64_t(splitmix64(rng_state_) % uint64_t(hi - lo + 1));
  }

  // Moves the pipe on as far as its toxics allow: the next piece of the chunk
  // in hand, or the next receive, or the end of the stream.
  void pump(Pipe& p) {
    Connection& c = *p.conn;
    if (c.closing || !c.connected) return;
    if (c.hello != Hello::none) {
      if (&p == &c.up) pump_hello(c);
      return;  // the server's bytes wait until the client's first ones are judged
    }
    if (c.tls && c.tls->phase() == TlsTermination::Phase::kFailed) return;  // the alert goes, then the close
    if (c.http) {
      pump_http(p);
      return;
    }
    refresh_plan(p);
    const DirectionPlan& plan = p.plan;
    // The reading side: a receive while there is room (none under a timeout toxic).
    uint8_t room = config_.buffer_ring ? kRingChunksInFlight : 1;
    if (!p.recv_op.pending && !p.retry_op.pending && !p.eof && !plan.hold && p.count < room) arm_recv(p);
    // The sending side: the head chunk, piece by piece.
    if (p.send_op.pending || p.timer_op.pending) return;
    if (p.count == 0) {
      if (p.eof) finish_stream(p);
      return;
    }
    if (plan.hold) return;  // a timeout toxic: the chunks wait
    const Chunk& chunk = p.chunks[p.head];
    uint64_t now = now_ns();
    if (!p.latency_done) {
      p.latency_done = true;
      int64_t delay_us = plan.latency_ms * 1000;
      if (plan.jitter_ms > 0) delay_us += uniform(-plan.jitter_ms * 1000, plan.jitter_ms * 1000);
      if (delay_us > 0 && chunk.arrived_ns + uint64_t(delay_us) * 1000 > now) {
        arm_timer_at(p.timer_op, chunk.arrived_ns + uint64_t(delay_us) * 1000);
        return;
      }
    }
    if (plan.rate_kbps > 0 && p.bw_next_ns > now) {
      arm_timer_at(p.timer_op, p.bw_next_ns);
      return;
    }
    uint64_t piece = chunk.len - p.off;
    if (plan.slicer) piece = split_slice(piece, plan.slicer_v, uint64_t(uniform(0, INT64_MAX - 1)));
    // Bandwidth: pieces of 20 ms worth at most, each paid for before the next.
    if (plan.rate_kbps > 0) piece = std::min<uint64_t>(piece, uint64_t(std::max<int64_t>(plan.rate_kbps * 20, 1)));
    if (plan.limit_bytes >= 0) {
      uint64_t left = p.sent >= uint64_t(plan.limit_bytes) ? 0 : uint64_t(plan.limit_bytes) - p.sent;
      if (left == 0) {
        close(c, false);
        return;
      }
      piece = std::min(piece, left);
    }
    // Each piece is paid for from when the last one was due, not from when the timer
    // woke us (that lateness would add up to a lower rate); after 100 ms of nothing
    // to send the clock starts again from now, as no burst is owed.
    if (plan.rate_kbps > 0) {
      if (p.bw_next_ns + 100'000'000ULL < now) p.bw_next_ns = now;
      p.bw_next_ns += piece * 1'000'000ULL / uint64_t(plan.rate_kbps);
    }
    io_uring_sqe* s = sqe();
    io_uring_prep_send(s, c.dst(p), chunk.data + p.off, piece, MSG_NOSIGNAL);
    submit_op(s, p.send_op);
  }

  void on_send(Pipe& p, int res) {
    p.send_op.pending = false;
    Connection& c = *p.conn;
    if (c.closing) {
      maybe_free(c);
      return;
    }
    if (res < 0) {  // the receiver is gone (EPIPE, ECONNRESET): reset the sender
      close(c, true);
      return;
    }
    auto& counter =
        p.stream == Stream::upstream ? c.proxy->counters->bytes_upstream : c.proxy->counters->bytes_downstream;
    counter.fetch_add(uint64_t(res), std::memory_order_relaxed);
    if (c.tls) {
      wire_sent(p, size_t(res));
      return;
    }
    if (c.http) {
      http_sent(p, size_t(res));
      return;
    }
    p.off += uint32_t(res);
    p.sent += uint64_t(res);
    if (p.plan.limit_bytes >= 0 && p.sent >= uint64_t(p.plan.limit_bytes)) {
      close(c, false);
      return;
    }
    if (p.off >= p.chunks[p.head].len) {
      pop_chunk(p);
    } else if (p.plan.slicer && p.plan.slicer_v.delay_us > 0) {
      arm_timer_at(p.timer_op, now_ns() + uint64_t(p.plan.slicer_v.delay_us) * 1000);
      return;
    }
    pump(p);
  }

  void on_timer(Pipe& p, Op& op) {
    op.pending = false;
    Connection& c = *p.conn;
    if (c.closing) {
      maybe_free(c);
      return;
    }
    pump(p);
  }

  // --- HTTP mode ------------------------------------------------------------

  const HttpRules& http_rules(const Connection& c) {
    static const HttpRules kNone;
    const auto& rules = c.proxy->toxics->http;
    return rules ? *rules : kNone;
  }

  // Drops the first n unsent bytes of the pipe's chunks (taken by the session
  // or discarded); emptied chunks give their buffers back.
  void http_advance(Pipe& p, size_t n) {
    if (p.conn->tls) {
      p.plain_off = std::min(p.plain.size(), p.plain_off + n);
      if (p.plain_off == p.plain.size()) {
        p.plain.clear();
        p.plain_off = 0;
      } else if (p.plain_off > kTlsBacklog) {  // a stream never fully consumed: drop what was
        p.plain.erase(0, p.plain_off);
        p.plain_off = 0;
      }
      return;
    }
    while (n > 0 && p.count > 0) {
      const Chunk& chunk = p.chunks[p.head];
      size_t take = std::min<size_t>(n, chunk.len - p.off);
      p.off += uint32_t(take);
      n -= take;
      if (p.off >= chunk.len) pop_chunk(p);
    }
  }

  void http_arm_recv(Pipe& p) {
    if (&p == &p.conn->down && !p.conn->server) return;  // a forward proxy's, before its upstream
    uint8_t room = config_.buffer_ring ? kRingChunksInFlight : 1;
    // Terminated: the plaintext and records a read can add stay bounded.
    if (p.conn->tls && (p.plain.size() - p.plain_off > kTlsBacklog || p.conn->up.wire.size() > kTlsBacklog ||
                        p.conn->down.wire.size() > kTlsBacklog))
      return;
    if (!p.recv_op.pending && !p.retry_op.pending && !p.eof && p.count < room) arm_recv(p);
  }

  void http_send(Pipe& p, const char* data, size_t len) {
    Connection& c = *p.conn;
    if (c.tls) {  // encrypted for the pipe's destination; counted as sent once its records are
      const std::string_view plain(data, len);
      const Status st = &p == &c.up ? c.tls->send_to_upstream(plain) : c.tls->send_to_client(plain);
      if (!st) {
        close(c, true);
        return;
      }
      p.owed_plain = len;
      tls_collect(c);
      flush_wire(p);
      return;
    }
    io_uring_sqe* s = sqe();
    io_uring_prep_send(s, c.dst(p), data, len, MSG_NOSIGNAL);
    submit_op(s, p.send_op);
  }

  // The request-head clock: a head begun and not complete in time is answered 408.
  void sync_head_clock(Connection& c) {
    const uint32_t limit_ms = http_rules(c).limits.head_timeout_ms;
    if (limit_ms == 0 || !c.http->in_head() || c.closing) return;
    if (c.head_serial != c.http->head_serial()) {
      c.head_serial = c.http->head_serial();
      c.head_deadline_ns = now_ns() + uint64_t(limit_ms) * 1'000'000ULL;
    }
    if (!c.http_head_op.pending) arm_timer_at(c.http_head_op, c.head_deadline_ns);
  }

  void on_head_clock(Connection& c) {
    c.http_head_op.pending = false;
    if (c.closing) {
      maybe_free(c);
      return;
    }
    if (!c.http->in_head()) return;
    if (c.head_serial == c.http->head_serial() && now_ns() >= c.head_deadline_ns) {
      c.http->head_timed_out();
      pump(c.up);
      return;
    }
    sync_head_clock(c);
  }

  // Moves an HTTP connection's direction on: what is in hand is sent first (a
  // forward budget, then the proxy's own bytes), then the session says what to
  // do with the bytes held. A session step that lets the other direction move
  // (an exchange ended, a head went out) pumps it too.
  void pump_http(Pipe& p) {
    Connection& c = *p.conn;
    HttpSession& session = *c.http;
    const bool client_side = &p == &c.up;
    http_arm_recv(p);
    if (p.send_op.pending || p.timer_op.pending) return;
    if (p.budget > 0) {
      const std::string_view in = held_input(p);
      p.sending_out = false;
      http_send(p, in.data(), std::min<size_t>(p.budget, in.size()));
      return;
    }
    if (p.out_off < p.out.size()) {
      p.sending_out = true;
      http_send(p, p.out.data() + p.out_off, p.out.size() - p.out_off);
      return;
    }
    if (p.close_after_budget) {
      close(c, false);
      return;
    }
    for (;;) {
      const std::string_view input = held_input(p);
      const HttpStep step = client_side ? session.client_step(input, http_rules(c)) : session.server_step(input);
      bool again = false;
      switch (step.act) {
        case HttpAct::judge:
          judge_request(c);
          if (c.closing) return;
          again = true;
          break;
        case HttpAct::judge_body:
          judge_body(c);
          if (c.closing) return;
          again = true;
          break;
        case HttpAct::consume:
        case HttpAct::drop:
          http_advance(p, step.bytes);
          again = true;
          break;
        case HttpAct::forward:
        case HttpAct::cut:
          p.close_after_budget = step.act == HttpAct::cut;
          if (step.bytes == 0) {
            if (p.close_after_budget) close(c, false);
            break;
          }
          if (!client_side && c.observe_id != 0)
            observe(c, input.substr(0, std::min(step.bytes, input.size())), step.act == HttpAct::cut);
          if (!client_side && c.response_tf) {  // the client gets what the transformer makes of them
            transform_response(p, input.substr(0, std::min(step.bytes, input.size())), step.act == HttpAct::cut);
            if (c.closing) return;
            again = p.out.empty() && !p.close_after_budget;
            break;
          }
          p.budget = step.bytes;
          p.sending_out = false;
          http_send(p, input.data(), std::min<size_t>(step.bytes, input.size()));
          break;
        case HttpAct::send_head:
          p.out = session.head();
          p.out_off = 0;
          p.out_is_answer = false;
          session.head_sent();
          p.sending_out = true;
          http_send(p, p.out.data(), p.out.size());
          break;
        case HttpAct::respond:
          c.down.out = session.take_answer();
          c.down.out_off = 0;
          c.down.out_is_answer = true;
          pump(c.down);
          break;
        case HttpAct::interim:
          // Said to the client between two of its requests' exchanges, so
          // nothing else is on its way to it; if something were, the client
          // does without (it sends the body after its own timeout).
          if (c.down.out.empty() && !c.down.send_op.pending && c.down.budget == 0) {
            c.down.out = std::string(HttpSession::take_interim());
            c.down.out_off = 0;
            c.down.out_is_answer = false;
            pump(c.down);
            if (c.closing) return;
          }
          again = true;
          break;
        case HttpAct::sleep:
          arm_timer_at(p.timer_op, now_ns() + step.delay_ms * 1'000'000ULL);
          break;
        case HttpAct::reset:
          close(c, true);
          return;
        case HttpAct::more:
        case HttpAct::wait:
          // A forward proxy's client gone while its request waits (a verdict,
          // its upstream): nothing will be sent to it.
          if (client_side && p.eof && c.await != Await::none) {
            close(c, false);
            return;
          }
          // A response that ends with the upstream's FIN: what its transformer held goes first.
          if (!client_side && input.empty() && p.eof && c.response_tf) {
            p.out = c.response_tf->finish();
            p.out_off = 0;
            p.out_is_answer = false;
            c.response_tf.reset();
            if (!p.out.empty()) {
              p.sending_out = true;
              http_send(p, p.out.data(), p.out.size());
              break;
            }
          }
          // The source ended and nothing of it is left: its FIN goes on, unless the
          // proxy still owes the client an answer of its own.
          if (input.empty() && p.eof && (client_side || (!session.holds_client() && p.out.empty()))) {
            finish_stream(p);
            if (c.closing) return;
          }
          break;
      }
      if (c.closing) return;
      if (!again) break;
    }
    http_arm_recv(p);
    if (client_side) {
      sync_head_clock(c);
      // The body stage ended without a verdict (a body the parser refused): the judge drops it.
      if (c.await == Await::body && !session.in_body_stage()) {
        c.await = Await::none;
        c.proxy->route.judge->withdrawn(c.request_id);
      }
    }
    if (session.take_kick()) pump(c.other(p));
  }

  void http_sent(Pipe& p, size_t n) {
    Connection& c = *p.conn;
    if (!p.sending_out) {
      http_advance(p, n);
      p.budget -= std::min(p.budget, n);
    } else {
      p.out_off += n;
      if (p.out_off >= p.out.size()) {
        p.out.clear();
        p.out_off = 0;
        if (p.out_is_answer) {
          p.out_is_answer = false;
          c.http->answer_sent();
          if (c.http->tunnel_ready()) {  // a CONNECT's 200 is out: the tunnel begins
            enter_tunnel(c);
            return;
          }
          if (c.http->answer_closes()) {
            close(c, false);
            return;
          }
        }
      }
    }
    pump(p);
    if (!c.closing && c.http->take_kick()) pump(c.other(p));
  }

  // The source ended (FIN) and everything before it was sent: the FIN goes on
  // (after slow_close's delay); when both directions have ended the connection closes.
  void finish_stream(Pipe& p) {
    Connection& c = *p.conn;
    if (p.shut) return;
    if (p.plan.slow_close_ms > 0 && !p.slow_close_done) {
      p.slow_close_done = true;
      arm_timer_at(p.timer_op, now_ns() + uint64_t(p.plan.slow_close_ms) * 1'000'000ULL);
      return;
    }
    p.shut = true;
    if (c.tls) {  // close_notify first, then the FIN once the records before it are out
      if (&p == &c.up)
        c.tls->close_upstream();
      else
        c.tls->close_client();
      tls_collect(c);
      p.fin_after_wire = true;
      flush_wire(p);
      if (!p.fin_after_wire && !c.other(p).fin_after_wire && c.other(p).shut) close(c, false);
      return;
    }
    if (!c.server) {  // a forward proxy's client ended before any upstream
      close(c, false);
      return;
    }
    (void)::shutdown(c.dst(p), SHUT_WR);
    if (c.other(p).shut) close(c, false);
  }

  // --- forward proxy ----------------------------------------------------------

  // A request head is complete: the proxy's own checks (credentials, the
  // target), then the judge. Never pumps (the session's loop is the caller).
  void judge_request(Connection& c) {
    HttpSession& s = *c.http;
    const ProxyRoute& route = c.proxy->route;
    end_observation(c);  // a new exchange: the last one's response is over
    RequestHead h;
    h.proxy = route.name;
    h.method = s.method();
    h.headers = s.headers();
    h.peer = c.peer;
    if (c.inner) {  // inside a CONNECT tunnel: the authority is the tunnel's
      h.stage = RequestStage::inner;
      h.scheme = c.tls ? "https" : "http";
      h.tls_terminated = c.tls != nullptr;
      h.host = c.tls && !c.tls->hello().server_name.empty() ? c.tls->hello().server_name : c.target->host;
      h.port = c.target->port;
      h.target = s.url();
      h.transparent = c.redirected;
      if (c.redirected) h.destination = c.target->authority();
      if (!h.target.empty() && h.target.front() != '/') {  // absolute-form inside the tunnel
        if (auto t = parse_proxy_target("GET", h.target); t) h.target = t->origin;
      }
    } else if (c.redirected) {
      if (!judge_redirected_request(c, h)) return;
    } else {
      if (route.own_answer && !s.url().empty() && s.url().front() == '/') {
        if (auto own = route.own_answer(h.method, s.url())) {
          s.verdict_answer(std::move(*own), true);
          return;
        }
      }
      if (route.authenticate) {
        std::string got;
        for (const auto& [k, v] : h.headers)
          if (k == "proxy-authorization") got = v;
        auto who = route.authenticate(got);
        if (!who) {
          s.verdict_answer(forward_text_answer(407, "proxy authentication required (Basic or Bearer)",
                                               {{"Proxy-Authenticate", "Basic realm=\"faultline\""}}),
                           true);
          return;
        }
        c.identity = std::move(*who);
      } else if (!route.proxy_authorization.empty()) {
        std::string got;
        for (const auto& [k, v] : h.headers)
          if (k == "proxy-authorization") got = v;
        if (!forward_credentials_ok(route.proxy_authorization, got)) {
          const std::string scheme = route.proxy_authorization.substr(0, route.proxy_authorization.find(' '));
          s.verdict_answer(forward_text_answer(407, "proxy authentication required (" + scheme + ")",
                                               {{"Proxy-Authenticate", scheme + " realm=\"faultline\""}}),
                           true);
          return;
        }
      }
      // The upstream was told "Connection: close": a client that sends a second
      // request here is closed (a FIN before any byte of an answer: clients
      // retry that on a new connection, which is judged anew).
      if (c.server) {
        close(c, false);
        return;
      }
      auto t = parse_proxy_target(h.method, s.url());
      if (!t) {
        s.verdict_answer(forward_text_answer(400, t.error().message), true);
        return;
      }
      c.target = *t;
      c.connect_request = h.method == "CONNECT";
      h.stage = c.connect_request ? RequestStage::connect : RequestStage::request;
      h.scheme = t->scheme;
      h.host = t->host;
      h.port = t->port;
      h.target = t->origin;
    }
    h.identity = c.identity;
    h.id = g_next_request_id.fetch_add(1, std::memory_order_relaxed);
    c.request_id = h.id;
    apply_verdict(c, h.id, route.judge->judge(h, HeldRequest(inbox_, h.id)));
  }

  // A piece of a body the judge asked for: more, or its final verdict. Never pumps.
  void judge_body(Connection& c) {
    HttpSession::BodyPiece piece = c.http->take_body_chunk();
    const RequestBodyChunk chunk{piece.bytes, piece.end, piece.over_cap};
    const uint64_t id = c.request_id;
    RequestVerdict v = c.proxy->route.judge->judge_body(id, chunk, HeldRequest(inbox_, id));
    if (v.kind == RequestVerdict::Kind::need_body) {
      if (!piece.end) {
        c.http->body_more();
        return;
      }
      // A judge that will not decide on the whole body: refused, never let through.
      v = RequestVerdict::answer(forward_text_answer(500, "the request's judge gave no verdict on its body"), true);
    }
    apply_verdict(c, id, std::move(v));
  }

  // Does what a verdict says, given now or later (on_held_verdict). Never pumps.
  void apply_verdict(Connection& c, uint64_t id, RequestVerdict v) {
    c.await = Await::none;
    if (v.kind == RequestVerdict::Kind::need_body) {
      // A body is read only for a request the session holds at its head (not
      // an SNI, nor a CONNECT, nor a verdict completing a hold).
      if (c.hello != Hello::judging && !(c.connect_request && !c.inner) && c.http->awaiting_verdict() &&
          !c.http->in_body_stage()) {
        c.http->verdict_need_body();
        c.await = Await::body;
        return;
      }
      v.kind = RequestVerdict::Kind::forward;
    }
    switch (v.kind) {
      case RequestVerdict::Kind::hold:
        c.await = Await::verdict;
        c.request_id = id;
        awaiting_[id] = &c;
        return;
      case RequestVerdict::Kind::answer:
        if (c.hello == Hello::judging) {  // an SNI: nothing HTTP can be said inside TLS, the tunnel ends
          close(c, false);
          return;
        }
        c.http->verdict_answer(std::move(v.response), v.close, std::move(v.answer_after));
        return;
      case RequestVerdict::Kind::forward:
        if (c.hello == Hello::judging && c.redirected) {  // connected only now that it is let through
          c.hello = Hello::connecting;
          start_upstream(c);
          return;
        }
        if (c.hello == Hello::judging) {
          c.hello = Hello::reading;
          sni_pass(c);
          return;
        }
        c.observe_wanted = v.observe_response;
        c.response_wanted = std::move(v.response_body);
        c.http->plan_forward(std::move(v.set_headers), std::move(v.request_body));
        if (c.inner) {
          forward_proceed(c);
          return;
        }
        start_upstream(c);
        return;
      case RequestVerdict::Kind::need_body:  // taken as forward above
        return;
    }
  }

  // The upstream is there: the request goes on (origin-form), or a CONNECT is
  // answered 200 and becomes a tunnel once that is sent.
  void forward_proceed(Connection& c) {
    if (c.redirected && !c.inner && c.transparent != Transparent::http) {  // its destination is connected
      transparent_connected(c);
      return;
    }
    HttpSession& s = *c.http;
    if (std::exchange(c.observe_wanted, false) && !(c.connect_request && !c.inner)) {
      c.observe_id = c.request_id;
      c.observe_serial = s.head_serial();
    }
    c.response_tf = std::exchange(c.response_wanted, nullptr);
    if (c.connect_request && !c.inner) c.response_tf.reset();
    c.response_tf_serial = s.head_serial();
    if (!c.inner && c.connect_request) {
      s.tunnel_established();
      return;
    }
    if (!c.inner) s.replace_head(origin_form_head(s.head(), c.target->origin));
    s.verdict_forward(http_rules(c));
  }

  // Resolves the target (numeric at once, a name on the resolver thread), then connects.
  void start_upstream(Connection& c) {
    const ProxyTarget& t = *c.target;
    c.await = Await::resolve;
    awaiting_[c.request_id] = &c;
    if (auto a = numeric_socket_address(t.host, t.port)) {
      upstream_resolved(c, *a);
      return;
    }
    if (!resolver_) resolver_ = std::make_unique<NameResolver>();
    const uint64_t id = c.request_id;
    resolver_->resolve(t.host, t.port, [this, id](Result<SocketAddress> r) {
      post([id, r = std::move(r)](Loop& l) mutable { l.on_resolved(id, std::move(r)); });
    });
  }

  void on_resolved(uint64_t id, Result<SocketAddress> r) {
    auto it = awaiting_.find(id);
    if (it == awaiting_.end() || it->second->await != Await::resolve) return;  // the client left
    Connection& c = *it->second;
    if (!c.forward) {  // a proxy's named upstream
      awaiting_.erase(it);
      c.await = Await::none;
      if (!r) {
        upstream_lost(c, c.proxy->counters->upstream_unresolved, r.error().describe());
        return;
      }
      c.upstream = *r;
      connect_upstream(c);
      return;
    }
    if (!r)
      fail_upstream(c, r.error().describe());
    else
      upstream_resolved(c, *r);
    pump_both(c);
  }

  void upstream_resolved(Connection& c, const SocketAddress& a) {
    c.upstream = a;
    c.connecting.reset(::socket(a.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!c.connecting) {
      fail_upstream(c, "cannot reach " + c.target->authority() + ": socket: " + std::strerror(errno));
      return;
    }
    set_int_opt(c.connecting.get(), IPPROTO_TCP, TCP_NODELAY, 1);
    if (c.proxy->route.mark != 0) set_int_opt(c.connecting.get(), SOL_SOCKET, SO_MARK, int(c.proxy->route.mark));
    c.await = Await::connect;
    io_uring_sqe* s = sqe();
    io_uring_prep_connect(s, c.connecting.get(), c.upstream->get(), c.upstream->length);
    submit_op(s, c.connect_op);
  }

  void on_forward_connect(Connection& c, int res) {
    awaiting_.erase(c.request_id);
    c.await = Await::none;
    if (res < 0) {
      c.connecting.reset();
      fail_upstream(c, "cannot reach " + c.target->authority() + ": " + std::strerror(-res));
    } else {
      c.server = std::move(c.connecting);
      refresh_plan(c.up);
      refresh_plan(c.down);
      forward_proceed(c);
    }
    pump_both(c);
  }

  // The upstream cannot be had: 502 naming it, and the connection closes.
  void fail_upstream(Connection& c, const std::string& why) {
    awaiting_.erase(c.request_id);
    c.await = Await::none;
    c.response_wanted.reset();
    // A judge that asked to see the response learns that none came.
    if (std::exchange(c.observe_wanted, false)) c.proxy->route.judge->on_response_bytes(c.request_id, {}, true);
    if (c.redirected && c.transparent != Transparent::http) {  // no HTTP to answer in: closed, as a refused connect
      c.proxy->counters->upstream_failed(c.proxy->counters->upstream_unreachable, why);
      close(c, false);
      return;
    }
    c.http->verdict_answer(forward_text_answer(502, why), true);
  }

  // A held request's verdict, delivered through the command queue.
  void on_held_verdict(uint64_t id, RequestVerdict v) {
    auto it = awaiting_.find(id);
    if (it == awaiting_.end() || it->second->await != Await::verdict) return;  // withdrawn, or closed
    Connection& c = *it->second;
    awaiting_.erase(it);
    apply_verdict(c, id, std::move(v));
    if (!c.closing && c.hello == Hello::none) pump_both(c);
  }

  void pump_both(Connection& c) {
    if (c.closing) return;
    pump(c.up);
    if (!c.closing) pump(c.down);
  }

  // The CONNECT's 200 is sent: the client's next bytes are the tunnel's. Its
  // ClientHello is scanned: terminated (each inner request judged by a new
  // session) when the proxy terminates TLS, else judged by SNI and relayed.
  void enter_tunnel(Connection& c) {
    const HttpRules& rules = http_rules(c);
    if (rules.tls.mode == HttpTlsMode::terminate && rules.tls.server && rules.tls.client) {
      c.http = std::make_unique<HttpSession>(c.target->authority(), c.seed);
      c.http->set_client(relay_peer_host(c.client.get()));
      c.http->judge_requests();
      c.inner = true;
    }
    c.hello = Hello::reading;
    c.held.clear();
    c.hello_wanted = 0;
    for (Pipe* p : {&c.up, &c.down}) {
      refresh_plan(*p);
      sync_deadline(*p);
    }
    pump_both(c);
  }

  // --- transparent (a forward proxy the kernel redirects connections to) ------

  // A plain HTTP request on a redirected connection: origin-form, judged by
  // its Host's name (an address, or no Host, is judged as the destination's
  // address: the client cannot pass one address off as another), and sent to
  // the destination whatever the Host says. false: answered already.
  bool judge_redirected_request(Connection& c, RequestHead& h) {
    HttpSession& s = *c.http;
    if (c.server) {  // one upstream exchange per connection, as in forward mode (a FIN; the client retries)
      close(c, false);
      return false;
    }
    if (h.method == "CONNECT") {
      s.verdict_answer(forward_text_answer(400, "CONNECT on a connection that was not made to a proxy"), true);
      return false;
    }
    std::string origin = s.url();
    if (!origin.empty() && origin.front() != '/') {  // absolute-form sent to the destination itself
      if (auto t = parse_proxy_target(h.method, origin); t) origin = t->origin;
    }
    c.target->origin = origin.empty() ? "/" : origin;
    c.connect_request = false;
    h.stage = RequestStage::request;
    h.scheme = "http";
    h.host = c.target->host;
    std::string host;
    for (const auto& [k, v] : h.headers)
      if (k == "host") host = v;
    if (auto name = host_name_of(host); !name.empty() && !numeric_socket_address(name, 1)) h.host = name;
    h.port = c.target->port;
    h.target = c.target->origin;
    h.transparent = true;
    h.destination = c.target->authority();
    return true;
  }

  // The name of a Host field ("api.example.com:8080" -> "api.example.com",
  // "[::1]:80" -> "::1"), lower case; empty when it has none.
  static std::string host_name_of(std::string_view host) {
    std::string out;
    if (!host.empty() && host.front() == '[') {
      const size_t end = host.find(']');
      if (end == std::string_view::npos) return {};
      out = std::string(host.substr(1, end - 1));
    } else {
      out = std::string(host.substr(0, host.find(':')));
    }
    while (!out.empty() && out.back() == '.') out.pop_back();
    for (char& ch : out) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    return out;
  }

  // The first bytes of a request line ("GET /", "POST /x", "OPTIONS *"): a
  // method token, then a space. Anything else is a stream of its own.
  static bool looks_like_http(std::string_view in) {
    size_t i = 0;
    while (i < in.size() && i < 24 && std::isupper(static_cast<unsigned char>(in[i]))) ++i;
    return i > 0 && i < in.size() && in[i] == ' ';
  }

  // A redirected connection that is neither HTTP nor TLS: judged once by its
  // destination; let through, it is relayed as bytes.
  void judge_stream(Connection& c) {
    c.transparent = Transparent::stream;
    judge_transparent_tunnel(c, RequestStage::stream, c.target->host);
  }

  void judge_transparent_tunnel(Connection& c, RequestStage stage, const std::string& host) {
    RequestHead h;
    h.id = g_next_request_id.fetch_add(1, std::memory_order_relaxed);
    h.proxy = c.proxy->route.name;
    h.stage = stage;
    h.method = "CONNECT";
    h.scheme = stage == RequestStage::tls_sni ? "https" : "tcp";
    h.host = host;
    h.port = c.target->port;
    h.peer = c.peer;
    h.transparent = true;
    h.destination = c.target->authority();
    c.request_id = h.id;
    c.hello = Hello::judging;
    apply_verdict(c, h.id, c.proxy->route.judge->judge(h, HeldRequest(inbox_, h.id)));
  }

  // The destination is connected: the held first bytes go on as what the
  // connection is (a stream, TLS by SNI, or TLS terminated here).
  void transparent_connected(Connection& c) {
    c.hello = Hello::reading;
    switch (c.transparent) {
      case Transparent::stream:
        c.http.reset();
        hello_judged(c);
        return;
      case Transparent::sni:
        sni_pass(c);
        return;
      case Transparent::terminate: {
        c.http = std::make_unique<HttpSession>(c.target->authority(), c.seed);
        c.http->judge_requests();
        c.inner = true;
        const auto scan =
            scan_client_hello(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.held.data()), c.held.size()));
        hello_parsed(c, scan.hello);
        return;
      }
      case Transparent::off:
      case Transparent::http:
        return;
    }
  }

  // The response bytes of a request forwarded with observe_response.
  void observe(Connection& c, std::string_view bytes, bool last) {
    c.proxy->route.judge->on_response_bytes(c.observe_id, bytes, false);
    if (last || c.http->head_serial() != c.observe_serial) end_observation(c);
  }

  // Response bytes the session let through, given to the verdict's
  // transformer; its output goes to the client as the proxy's own bytes. At
  // the response's end (or a cut) what it still holds follows.
  void transform_response(Pipe& p, std::string_view bytes, bool cut) {
    Connection& c = *p.conn;
    std::string out = c.response_tf->feed(bytes);
    if (cut || c.http->response_done() || c.http->head_serial() != c.response_tf_serial) {
      out += c.response_tf->finish();
      c.response_tf.reset();
    }
    http_advance(p, bytes.size());
    p.close_after_budget = cut;
    if (out.empty()) {
      if (cut) close(c, false);
      return;
    }
    p.out = std::move(out);
    p.out_off = 0;
    p.out_is_answer = false;
    p.sending_out = true;
    http_send(p, p.out.data(), p.out.size());
  }

  void end_observation(Connection& c) {
    if (c.observe_id == 0) return;
    c.proxy->route.judge->on_response_bytes(std::exchange(c.observe_id, 0), {}, true);
  }

  // --- TLS ------------------------------------------------------------------

  // The bytes the session reads next: the head chunk's, or (terminated) the plaintext.
  static std::string_view held_input(const Pipe& p) {
    if (p.conn->tls) return std::string_view(p.plain).substr(p.plain_off);
    if (p.count == 0) return {};
    const Chunk& chunk = p.chunks[p.head];
    return {chunk.data + p.off, chunk.len - p.off};
  }

  // The original destination (transparent) or the proxy's upstream.
  static const SocketAddress& destination(const Connection& c) {
    return c.upstream ? *c.upstream : c.proxy->route.upstream;
  }

  static std::string address_only(const SocketAddress& a) {
    std::string text = endpoint_text(a);
    text.erase(text.rfind(':'));
    if (!text.empty() && text.front() == '[') text = text.substr(1, text.size() - 2);
    return text;
  }

  static uint16_t port_of(const SocketAddress& a) {
    const std::string text = endpoint_text(a);
    return uint16_t(std::stoul(text.substr(text.rfind(':') + 1)));
  }

  // The client's first bytes, with TLS on: held (they are copied once, at most
  // kMaxClientHelloBytes, which the scanner enforces) until they are known to be
  // a ClientHello or not; then the connection is HTTP, a TLS stream faulted by
  // its SNI, or terminated.
  void pump_hello(Connection& c) {
    Pipe& p = c.up;
    if (c.hello == Hello::delaying) {
      if (!p.timer_op.pending) hello_judged(c);
      return;
    }
    if (c.hello == Hello::connecting) return;  // the client's bytes wait in the kernel
    if (c.hello == Hello::judging) {           // the SNI's verdict is awaited: watch for the client leaving
      if (p.eof)
        close(c, false);
      else if (!p.recv_op.pending && !p.retry_op.pending && p.count == 0)
        arm_recv(p);
      return;
    }
    while (p.count > 0) {
      const std::string_view in = held_input(p);
      c.held.append(in.data(), in.size());
      pop_chunk(p);
    }
    if (!c.held.empty() && c.held.size() >= c.hello_wanted) {
      const auto scan =
          scan_client_hello(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(c.held.data()), c.held.size()));
      switch (scan.status) {
        case ClientHelloStatus::kNeedMore:
          c.hello_wanted = scan.wanted;
          break;
        case ClientHelloStatus::kNotTls:                     // plain HTTP: the session reads the bytes held
          if (http_rules(c).tls.mode == HttpTlsMode::own) {  // it listens with TLS only
            close(c, false);
            return;
          }
          if (c.redirected && !c.inner && c.transparent == Transparent::off) {
            if (!looks_like_http(c.held)) {
              judge_stream(c);
              return;
            }
            c.transparent = Transparent::http;
          }
          hello_judged(c);
          return;
        case ClientHelloStatus::kMalformed:  // nothing a real client sends
          close(c, false);
          return;
        case ClientHelloStatus::kParsed:
          hello_parsed(c, scan.hello);
          return;
      }
    }
    if (p.eof) {
      close(c, false);
      return;
    }
    if (!p.recv_op.pending && !p.retry_op.pending) arm_recv(p);
  }

  void hello_parsed(Connection& c, const ClientHello& hello) {
    const HttpRules& rules = http_rules(c);
    if (c.redirected && c.transparent == Transparent::off) {
      const bool terminate = rules.tls.mode == HttpTlsMode::terminate && rules.tls.server && rules.tls.client;
      if (terminate) {  // as a terminated CONNECT: the inner requests are judged, after the upstream is there
        c.transparent = Transparent::terminate;
        c.hello = Hello::connecting;
        c.request_id = g_next_request_id.fetch_add(1, std::memory_order_relaxed);
        start_upstream(c);
        return;
      }
      c.transparent = Transparent::sni;
      c.sni = hello.server_name;
      judge_transparent_tunnel(c, RequestStage::tls_sni, c.sni.empty() ? c.target->host : c.sni);
      return;
    }
    const bool own = rules.tls.mode == HttpTlsMode::own && rules.tls.server;
    if (own || (rules.tls.mode == HttpTlsMode::terminate && rules.tls.server && rules.tls.client)) {
      c.hello = Hello::none;
      // A client that sent no SNI connected by address: its leaf, and the
      // upstream's check, are for that address. A proxy of its own TLS checks
      // its upstream's name whatever the client asked (and may have a plain
      // upstream: no client context).
      std::string fallback = c.forward ? c.target->host : address_only(destination(c));
      if (own) {  // its leaf names the address the client connected to
        if (auto local = local_address(c.client.get())) fallback = address_only(*local);
      }
      // A terminated upstream may have a client context of its own (its
      // roots, a client certificate), by its SNI or destination and port.
      std::shared_ptr<TlsClientContext> upstream_client = rules.tls.client;
      if (!own && !rules.tls.upstream_clients.empty()) {
        const uint16_t port = c.forward ? c.target->port : port_of(destination(c));
        upstream_client = upstream_client_for(rules.tls, hello.server_name, fallback, port);
      }
      c.tls = std::make_unique<TlsTermination>(rules.tls.server, std::move(upstream_client), fallback,
                                               own ? rules.tls.upstream_name : std::string());
      Status st = c.tls->from_client(c.held);
      c.held = std::string();
      if (st && c.tls->phase() == TlsTermination::Phase::kConnectUpstream) st = c.tls->upstream_connected();
      tls_after(c);
      return;
    }
    c.sni = hello.server_name;
    if (c.forward && !c.sni.empty()) {  // a tunnel's SNI is judged too (it may name another host)
      RequestHead h;
      h.id = g_next_request_id.fetch_add(1, std::memory_order_relaxed);
      h.proxy = c.proxy->route.name;
      h.stage = RequestStage::tls_sni;
      h.method = "CONNECT";
      h.scheme = "https";
      h.host = c.sni;
      h.port = c.target->port;
      h.peer = c.peer;
      h.identity = c.identity;
      c.request_id = h.id;
      c.hello = Hello::judging;
      apply_verdict(c, h.id, c.proxy->route.judge->judge(h, HeldRequest(inbox_, h.id)));
      return;
    }
    sni_pass(c);
  }

  // Pass-through: the bytes go on untouched, after the fault (if any) the
  // SNI takes; a client without SNI is matched on the address it connected to.
  void sni_pass(Connection& c) {
    const HttpRules& rules = http_rules(c);
    const std::string name = c.sni.empty() ? address_only(destination(c)) : c.sni;
    c.http.reset();
    const HttpFaultEntry* f = fault_by_sni(rules, name, port_of(destination(c)), c.seed);
    if (f != nullptr && f->fault.type == HttpFaultType::reset) {
      close(c, true);
      return;
    }
    if (f != nullptr && f->fault.type == HttpFaultType::delay) {
      c.hello = Hello::delaying;
      arm_timer_at(c.up.timer_op, now_ns() + uint64_t(f->fault.delay_ms) * 1'000'000ULL);
      return;
    }
    hello_judged(c);
  }

  // The held bytes go back to the client pipe as a chunk of their own (every
  // chunk was taken, so there is room), and the connection moves on as what it is.
  void hello_judged(Connection& c) {
    c.hello = Hello::none;
    Pipe& p = c.up;
    if (!c.held.empty()) {
      Chunk& chunk = p.chunks[p.head];
      chunk = Chunk{c.held.data(), uint32_t(c.held.size()), -1, now_ns()};
      p.count = 1;
      p.off = 0;
    }
    pump(c.up);
    if (!c.closing) pump(c.down);
  }

  // Ciphertext read (the pipe's chunks) goes into the termination.
  void tls_in(Pipe& p) {
    Connection& c = *p.conn;
    Status st;
    while (p.count > 0 && st) {
      const std::string_view in = held_input_chunk(p);
      st = &p == &c.up ? c.tls->from_client(in) : c.tls->from_upstream(in);
      pop_chunk(p);
    }
    tls_after(c);
  }

  static std::string_view held_input_chunk(const Pipe& p) {
    const Chunk& chunk = p.chunks[p.head];
    return {chunk.data + p.off, chunk.len - p.off};
  }

  // Moves what the termination made: records to each socket's pipe, plaintext
  // to each session's input. No pumping (a send in progress may call it).
  void tls_collect(Connection& c) {
    c.up.wire += c.tls->to_upstream();
    c.down.wire += c.tls->to_client();
    c.up.plain += c.tls->take_from_client();
    c.down.plain += c.tls->take_from_upstream();
  }

  void flush_wire(Pipe& p) {
    Connection& c = *p.conn;
    if (p.send_op.pending || c.closing) return;
    if (p.wire_off < p.wire.size()) {
      io_uring_sqe* s = sqe();
      io_uring_prep_send(s, c.dst(p), p.wire.data() + p.wire_off, p.wire.size() - p.wire_off, MSG_NOSIGNAL);
      submit_op(s, p.send_op);
      return;
    }
    p.wire.clear();
    p.wire_off = 0;
    if (p.fin_after_wire) {
      p.fin_after_wire = false;
      (void)::shutdown(c.dst(p), SHUT_WR);
    }
  }

  // After bytes went into the termination: a failed handshake sends the client
  // its alert and closes; else records go out and both sessions step.
  void tls_after(Connection& c) {
    tls_collect(c);
    if (c.tls->phase() == TlsTermination::Phase::kFailed) {
      // A proxy's own upstream refused (its certificate, its handshake): counted
      // and logged as an upstream that could not be had.
      if (!c.tls_failure_counted && http_rules(c).tls.mode == HttpTlsMode::own &&
          c.tls->error().rfind("upstream ", 0) == 0) {
        c.tls_failure_counted = true;
        c.proxy->counters->upstream_failed(c.proxy->counters->upstream_unreachable, c.tls->error());
      }
      c.up.wire.clear();  // nothing more reaches an upstream that failed
      c.up.eof = c.down.eof = true;
      if (c.down.wire.empty() && !c.down.send_op.pending) {
        close(c, false);
        return;
      }
      c.down.owed_plain = 0;
      c.down.fin_after_wire = true;
      flush_wire(c.down);
      return;
    }
    if (c.tls->client_done()) c.up.eof = true;
    if (c.tls->upstream_done()) c.down.eof = true;
    flush_wire(c.up);
    flush_wire(c.down);
    if (c.tls->phase() != TlsTermination::Phase::kEstablished) {
      // What the client sends before the upstream is verified is held in the
      // termination: past the backlog, its reads pause until then.
      const bool client_full = c.tls->held_client_bytes().size() > kTlsBacklog;
      for (Pipe* p : {&c.up, &c.down})
        if (!c.closing && !p->eof && !p->recv_op.pending && !p->retry_op.pending && p->count == 0 &&
            !(p == &c.up && client_full))
          arm_recv(*p);
      return;
    }
    pump(c.up);
    if (!c.closing) pump(c.down);
  }

  void wire_sent(Pipe& p, size_t n) {
    Connection& c = *p.conn;
    p.wire_off += n;
    flush_wire(p);
    if (p.send_op.pending || c.closing) return;
    if (c.tls->phase() == TlsTermination::Phase::kFailed) {
      if (&p == &c.down) close(c, false);
      return;
    }
    if (p.shut && c.other(p).shut && !c.other(p).fin_after_wire) {
      close(c, false);
      return;
    }
    if (size_t owed = std::exchange(p.owed_plain, 0); owed > 0) {
      http_sent(p, owed);
      if (!c.closing) pump(c.other(p));
      return;
    }
    tls_after(c);
  }

  static constexpr uint16_t kBufferGroup = 1;
  static constexpr size_t kTlsBacklog = 256 * 1024;  // plaintext or records held per direction before reads pause

  WorkerConfig config_;
  io_uring ring_{};
  bool ring_ready_ = false;
  io_uring_buf_ring* br_ = nullptr;
  size_t br_bytes_ = 0;
  char* buffers_ = nullptr;
  size_t buffers_bytes_ = 0;
  UniqueFd wake_fd_;
  uint64_t wake_value_ = 0;
  Op wake_op_{OpKind::wake};
  std::mutex mu_;
  std::vector<std::function<void(Loop&)>> queue_;
  bool stopping_ = false;
  std::unordered_map<uint64_t, ProxyState*> proxies_;
  uint64_t live_ = 0;  // connections not yet freed
  std::vector<Connection*> dead_connections_;
  std::vector<ProxyState*> dead_proxies_;
  uint64_t rng_state_ = now_ns();
  std::shared_ptr<HeldVerdictInbox> inbox_;
  std::unique_ptr<NameResolver> resolver_;
  std::unordered_map<uint64_t, Connection*> awaiting_;  // forward: by request id
};

Result<std::unique_ptr<RelayWorker>> RelayWorker::start(const WorkerConfig& config) {
  auto loop = std::make_unique<Loop>(config);
  std::unique_ptr<RelayWorker> w(new RelayWorker(std::move(loop)));
  Loop* l = w->loop_.get();
  // The ring is made, registered and driven by the worker's own thread: the kernel
  // runs completion work on the task that submits, and only that task touches it.
  std::promise<Status> ready;
  auto started = ready.get_future();
  w->thread_ = std::thread([l, &ready] {
    Status s = l->init();
    bool ok = s.ok();
    ready.set_value(std::move(s));
    if (ok) l->run();
  });
  Status s = started.get();
  if (!s) {
    w->thread_.join();
    return s.error();
  }
  return w;
}

RelayWorker::RelayWorker(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

RelayWorker::~RelayWorker() {
  if (thread_.joinable()) {
    loop_->post([](Loop& l) { l.stop_all(); });
    thread_.join();
  }
}

std::future<void> RelayWorker::post_call(std::function<void(Loop&)> fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto future = done->get_future();
  loop_->post([fn = std::move(fn), done](Loop& l) {
    fn(l);
    done->set_value();
  });
  return future;
}

void RelayWorker::call(std::function<void(Loop&)> fn) { post_call(std::move(fn)).wait(); }

void RelayWorker::start_proxy(uint64_t id, UniqueFd listener, ProxyRoute route, std::shared_ptr<const ToxicSet> toxics,
                              std::shared_ptr<ProxyCounters> counters) {
  auto fd = std::make_shared<UniqueFd>(std::move(listener));
  call([&](Loop& l) { l.start_proxy(id, std::move(*fd), std::move(route), std::move(toxics), std::move(counters)); });
}

void RelayWorker::release_listener(uint64_t id) {
  call([id](Loop& l) { l.release_listener(id); });
}

void RelayWorker::stop_proxy(uint64_t id) {
  call([id](Loop& l) { l.stop_proxy(id); });
}

void RelayWorker::set_toxics(const std::vector<std::unique_ptr<RelayWorker>>& workers, uint64_t id,
                             const std::shared_ptr<const ToxicSet>& toxics) {
  std::vector<std::future<void>> applied;
  applied.reserve(workers.size());
  for (const auto& w : workers) applied.push_back(w->post_call([id, toxics](Loop& l) { l.set_toxics(id, toxics); }));
  for (auto& a : applied) a.wait();
}

}  // namespace faultline
