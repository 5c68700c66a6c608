// One thread per writer takes the queued lines and writes them in order.
#include "base/line_writer.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace faultline {

struct LineWriter::State {
  int fd;
  size_t capacity;
  std::string who;
  std::mutex m;
  std::condition_variable wake;     // a line was queued
  std::condition_variable written;  // the queue went empty
  std::deque<std::string> lines;
  bool writing = false;  // a line is out of the queue, not yet written
  size_t dropped_total = 0;
  size_t dropped_unsaid = 0;  // dropped since the last "dropped" line
};

namespace {

void write_all(int fd, const std::string& s) {
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::write(fd, s.data() + at, s.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader is gone: the line is lost, as a log's is
    at += static_cast<size_t>(n);
  }
}

}  // namespace

LineWriter& LineWriter::open(int fd, size_t capacity, std::string who) {
  auto* s = new State{.fd = fd, .capacity = capacity == 0 ? 1 : capacity, .who = std::move(who)};
  // The thread takes no signal: a process that waits for its signals on
  // another thread (faultd's SIGTERM, SIGHUP) must not lose one to it.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &before);
  std::thread([s] {
    std::unique_lock lock(s->m);
    for (;;) {
      s->wake.wait(lock, [&] { return !s->lines.empty() || s->dropped_unsaid > 0; });
      std::string out;
      if (!s->lines.empty()) {
        out = std::move(s->lines.front());
        s->lines.pop_front();
      } else {
        out = s->who + ": " + std::to_string(s->dropped_unsaid) + " log lines dropped: the log's reader fell behind\n";
        s->dropped_unsaid = 0;
      }
      s->writing = true;
      lock.unlock();
      write_all(s->fd, out);
      lock.lock();
      s->writing = false;
      if (s->lines.empty() && s->dropped_unsaid == 0) s->written.notify_all();
    }
  }).detach();
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return *new LineWriter(s);
}

void LineWriter::post(std::string line) {
  line += '\n';
  {
    std::lock_guard lock(s_->m);
    if (s_->lines.size() >= s_->capacity) {
      ++s_->dropped_total;
      ++s_->dropped_unsaid;
      return;
    }
    s_->lines.push_back(std::move(line));
  }
  s_->wake.notify_one();
}

bool LineWriter::drain(std::chrono::milliseconds within) {
  std::unique_lock lock(s_->m);
  return s_->written.wait_for(lock, within,
                              [&] { return s_->lines.empty() && s_->dropped_unsaid == 0 && !s_->writing; });
}

size_t LineWriter::dropped() const {
  std::lock_guard lock(s_->m);
  return s_->dropped_total;
}

}  // namespace faultline
