// A served run's thread: the stream's head, the typed experiment run as
// `faultctl run` runs it (served_run.h) printing into frames, the client's
// signals as the run's stop source, and the last frame.
#include "userspace/daemon/run_service.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <ostream>
#include <streambuf>
#include <utility>

#include "base/clock.h"
#include "base/exit_code.h"
#include "base/units.h"
#include "userspace/daemon/served_run.h"

namespace faultline {
namespace {

constexpr size_t kMaxClientLine = 256;
constexpr size_t kMaxFrameText = 16 * 1024;
constexpr time_t kSendTimeoutS = 10;
constexpr auto kSpareDelay = std::chrono::milliseconds(100);

}  // namespace

// One run: its connection and how far it got. The connection is written by the
// run's thread and, for the last frame of a run faultd leaves, by leave_all().
struct RunService::Run {
  UniqueFd fd;
  std::mutex send_mu;
  bool cut = false;  // faultd left the fault: what the run prints after that goes nowhere
  std::atomic<bool> leaving{false};
  std::atomic<bool> client_gone{false};
  std::atomic<bool> done{false};
  std::thread thread;

  // Sends one frame; false once the client is gone (or does not read for kSendTimeoutS).
  bool send(const nlohmann::json& frame, bool past_cut = false) {
    std::lock_guard lock(send_mu);
    if (cut && !past_cut) return true;
    if (client_gone) return false;
    const std::string line = frame.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    return send_raw(line);
  }
  bool send_raw(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        client_gone = true;
        return false;
      }
      sent += size_t(n);
    }
    return true;
  }
};

// A thread parked until a run is handed to it; it runs that one job and ends.
struct RunService::Spare {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;  // under mu
  bool quit = false;          // under mu
  std::thread thread;
};

std::shared_ptr<RunService::Spare> RunService::make_spare() {
  auto s = std::make_shared<Spare>();
  s->thread = std::thread([s] {
    std::function<void()> job;
    {
      std::unique_lock lock(s->mu);
      s->cv.wait(lock, [&] { return s->quit || s->job; });
      job = std::move(s->job);
    }
    if (job) job();
  });
  return s;
}

void RunService::run_on(Run& run, std::function<void()> job) {
  if (std::shared_ptr<Spare> s = std::exchange(spare_, nullptr)) {
    {
      std::lock_guard lock(s->mu);
      s->job = std::move(job);
    }
    s->cv.notify_one();
    run.thread = std::move(s->thread);
  } else {
    run.thread = std::thread(std::move(job));
  }
  // The next run's thread, made a little later on the serving thread: made at
  // once, its start competes for a CPU with the run it follows (a loaded
  // 2-CPU machine gave it tens of milliseconds, strace). A run that comes
  // before it is ready makes its own thread.
  server_.after(kSpareDelay, [this] {
    std::lock_guard lock(mu_);
    if (!leaving_ && !spare_) spare_ = make_spare();
  });
}

RunService::RunService(HttpServer& server, std::function<void(const std::string&)> log)
    : server_(server), log_(std::move(log)) {
  std::lock_guard lock(mu_);
  spare_ = make_spare();
}

namespace {

// An ostream's buffer that sends what is written as {"out": ...} or {"err": ...}
// frames, a line at a time (or at a flush), so the client prints the lines of
// both streams in the order the run wrote them.
class FrameBuf final : public std::streambuf {
 public:
  FrameBuf(RunService::Run& run, const char* key) : run_(run), key_(key) {}
  ~FrameBuf() override { (void)flush_text(); }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    text_.push_back(traits_type::to_char_type(ch));
    if (ch == '\n' || text_.size() >= kMaxFrameText) (void)flush_text();
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) (void)overflow(traits_type::to_int_type(s[i]));
    return n;
  }
  int sync() override { return flush_text() ? 0 : 0; }  // a gone client is the stop source's news

 private:
  bool flush_text() {
    if (text_.empty()) return true;
    const bool ok = run_.send({{key_, text_}});
    text_.clear();
    return ok;
  }
  RunService::Run& run_;
  const char* key_;
  std::string text_;
};

// The client's stop signals: "signal N" lines, and its hanging up (SIGHUP,
// as a terminal that goes away), read without blocking at each tick.
class ClientStop final : public StopSource {
 public:
  ClientStop(RunService::Run& run, std::string unread) : run_(run), in_(std::move(unread)) { parse(); }

  [[nodiscard]] int pending() const override {
    if (signal_ == 0) read_client();
    return signal_;
  }
  int take() override {
    const int s = pending();
    if (!run_.client_gone) signal_ = 0;
    return s;
  }

 private:
  void read_client() const {
    if (run_.client_gone) {
      signal_ = SIGHUP;
      return;
    }
    char buf[256];
    for (;;) {
      const ssize_t n = ::recv(run_.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        in_.append(buf, size_t(n));
        parse();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      run_.client_gone = true;  // closed, or broke
      signal_ = SIGHUP;
      return;
    }
  }
  void parse() const {
    for (size_t nl = in_.find('\n'); nl != std::string::npos; nl = in_.find('\n')) {
      const std::string line = in_.substr(0, nl);
      in_.erase(0, nl + 1);
      if (line == "signal " + std::to_string(SIGINT)) signal_ = SIGINT;
      if (line == "signal " + std::to_string(SIGTERM)) signal_ = SIGTERM;
      if (line == "signal " + std::to_string(SIGHUP)) signal_ = SIGHUP;
    }
    // A client that sends something else at length is not faultctl: hang up on it.
    if (in_.size() > kMaxClientLine) {
      run_.client_gone = true;
      signal_ = SIGHUP;
    }
  }
  RunService::Run& run_;
  mutable std::string in_;
  mutable int signal_ = 0;
};

// The run's fault, except that once faultd is leaving it stops watching and
// leaves the fault on in the kernel: ending it is not faultd's to do when it
// stops (a restart must not end or change a fault), its expiry is.
class LeavableFault final : public RunnableFault {
 public:
  LeavableFault(RunnableFault& f, RunService::Run& run) : f_(f), run_(run) {}

  [[nodiscard]] std::string summary() const override { return f_.summary(); }
  [[nodiscard]] nlohmann::json plan() const override { return f_.plan(); }
  [[nodiscard]] std::string dry_run_text() const override { return f_.dry_run_text(); }
  [[nodiscard]] uint32_t netns_inode() const override { return f_.netns_inode(); }
  [[nodiscard]] Result<FaultStart> apply() override {
    if (run_.leaving) return make_error(ECANCELED, "faultd is stopping: nothing was applied");
    auto s = f_.apply();
    if (s) started_ = *s;
    return s;
  }
  [[nodiscard]] std::optional<FaultEnding> check() override {
    if (run_.leaving && !left_) leave();
    if (left_) return FaultEnding{RunOutcome::Interrupted, "faultd stopped", std::nullopt};
    return f_.check();
  }
  [[nodiscard]] FaultObservation observe() override { return f_.observe(); }
  [[nodiscard]] Status end(std::string_view reason) override {
    if (run_.leaving && !left_) leave();
    if (left_) return {};
    return f_.end(reason);
  }
  void describe_end(bool ended, FaultObservation& obs) const override {
    if (!left_) f_.describe_end(ended, obs);
  }
  [[nodiscard]] std::optional<std::string> touched_nothing() const override {
    return left_ ? std::nullopt : f_.touched_nothing();
  }
  bool forward_signal(int sig) override { return f_.forward_signal(sig); }
  [[nodiscard]] bool wraps_command() const override { return f_.wraps_command(); }

  [[nodiscard]] bool left() const { return left_; }
  // What the client is told when faultd left the fault on.
  [[nodiscard]] std::string left_text() const {
    const uint64_t now = boottime_ns();
    const uint64_t left_ns = started_ && started_->expires_ns > now ? started_->expires_ns - now : 0;
    const std::string id = started_ ? started_->id : "?";
    return "faultd stopped while fault " + id + " was on: it stays on in the kernel until it expires (in " +
           format_duration(left_ns / 1'000'000'000ULL * 1'000'000'000ULL) + "); faultctl abort " + id +
           " ends it sooner";
  }

 private:
  void leave() {
    left_ = true;
    std::lock_guard lock(run_.send_mu);
    run_.cut = true;
  }
  RunnableFault& f_;
  RunService::Run& run_;
  std::optional<FaultStart> started_;
  bool left_ = false;
};

class ServedStreams final : public RunStreams {
 public:
  ServedStreams(RunService::Run& run, std::string unread, bool terminal)
      : run_(run),
        out_buf_(run, "out"),
        err_buf_(run, "err"),
        out_(&out_buf_),
        err_(&err_buf_),
        stop_(run, std::move(unread)),
        io_{out_, err_, &stop_, terminal} {}

  [[nodiscard]] const RunIo& io() override { return io_; }
  [[nodiscard]] RunnableFault& hold(RunnableFault& fault) override { return held_.emplace(fault, run_); }
  [[nodiscard]] const LeavableFault* held() const { return held_ ? &*held_ : nullptr; }
  void flush() {
    out_.flush();
    err_.flush();
  }

 private:
  RunService::Run& run_;
  FrameBuf out_buf_, err_buf_;
  std::ostream out_, err_;
  ClientStop stop_;
  RunIo io_;
  std::optional<LeavableFault> held_;
};

}  // namespace

HttpReply RunService::start(const HttpRequest& req) {
  const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  auto served = served_run_from_json(body);
  if (!served) return HttpReply::error(400, served.error().message);
  if (leaving_) return HttpReply::error(503, "faultd is stopping: run it again, with or without faultd");
  reap_finished();
  const uint64_t exchange = req.exchange;
  const pid_t client = req.peer.pid;
  // The server registers the request as waiting once this handler returns;
  // the connection is taken on the serving thread's next turn.
  server_.after(std::chrono::milliseconds(0), [this, exchange, body, client, served = std::move(*served)] {
    auto taken = server_.take_connection(exchange);
    if (!taken) return;
    auto run = std::make_shared<Run>();
    run->fd = std::move(taken->fd);
    const int fl = ::fcntl(run->fd.get(), F_GETFL);
    if (fl >= 0) (void)::fcntl(run->fd.get(), F_SETFL, fl & ~O_NONBLOCK);
    timeval tv{kSendTimeoutS, 0};
    (void)::setsockopt(run->fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::lock_guard lock(mu_);
    runs_.push_back(run);
    run_on(*run, [this, run, body, client, served, unread = std::move(taken->unread)]() mutable {
      const std::string what = body["experiment"].dump();
      if (log_) log_("faultd: run " + what + " (pid " + std::to_string(client) + ") started");
      int code = kExitFailure;
      std::string left;
      if (run->send_raw("HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nCache-Control: no-store\r\n"
                        "Connection: close\r\n\r\n")) {
        ServedStreams streams(*run, std::move(unread), body.value("terminal", false));
        code = run_served(served, streams);
        streams.flush();
        if (const LeavableFault* f = streams.held(); f != nullptr && f->left()) left = f->left_text();
      }
      if (!left.empty())
        (void)run->send({{"left", left}}, true);
      else
        (void)run->send({{"exit_code", code}});
      ::shutdown(run->fd.get(), SHUT_RDWR);
      if (log_)
        log_("faultd: run " + what + " (pid " + std::to_string(client) + ") " +
             (left.empty() ? "ended, exit code " + std::to_string(code) : "left on: " + left));
      run->done = true;
    });
  });
  return HttpReply::later();
}

size_t RunService::active() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& r : runs_) n += r->done ? 0 : 1;
  return n;
}

void RunService::leave_all() {
  leaving_ = true;
  std::lock_guard lock(mu_);
  for (auto& r : runs_) r->leaving = true;
}

void RunService::reap_finished() {
  std::lock_guard lock(mu_);
  for (auto it = runs_.begin(); it != runs_.end();) {
    if ((*it)->done && (*it)->thread.joinable()) {
      (*it)->thread.join();
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
}

RunService::~RunService() {
  leave_all();
  std::list<std::shared_ptr<Run>> runs;
  std::shared_ptr<Spare> spare;
  {
    std::lock_guard lock(mu_);
    runs.swap(runs_);
    spare.swap(spare_);
  }
  if (spare) {
    {
      std::lock_guard lock(spare->mu);
      spare->quit = true;
    }
    spare->cv.notify_one();
    if (spare->thread.joinable()) spare->thread.join();
  }
  for (auto& r : runs) {
    if (r->thread.joinable()) r->thread.join();
  }
}

}  // namespace faultline
