#include "ctl/guard_exec_prompt.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace faultline {

std::optional<PromptAnswer> parse_prompt_answer(std::string_view line) {
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
  std::string w(line);
  std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (w == "o" || w == "once" || w == "y" || w == "yes") return PromptAnswer::Once;
  if (w == "a" || w == "always") return PromptAnswer::Always;
  if (w == "d" || w == "deny" || w == "n" || w == "no") return PromptAnswer::Deny;
  return std::nullopt;
}

std::shared_ptr<ExecPrompt> ExecPrompt::open_terminal() {
  if (::isatty(STDIN_FILENO) != 1) return nullptr;
  auto p = open("/dev/tty");
  if (!p) return nullptr;
  const pid_t fg = ::tcgetpgrp((*p)->tty_.get());
  if (fg < 0 || fg != ::getpgrp()) return nullptr;
  return std::move(*p);
}

Result<std::shared_ptr<ExecPrompt>> ExecPrompt::open(const std::string& tty) {
  UniqueFd fd(::open(tty.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!fd) return errno_error(tty);
  if (::isatty(fd.get()) != 1) return make_error(ENOTTY, tty + " is not a terminal");
  std::shared_ptr<ExecPrompt> p(new ExecPrompt(std::move(fd)));
  if (!p->wake_) return errno_error("eventfd");
  return p;
}

ExecPrompt::ExecPrompt(UniqueFd tty)
    : tty_(std::move(tty)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), thread_([this] { run(); }) {}

ExecPrompt::~ExecPrompt() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  thread_.join();
}

void ExecPrompt::ask(std::string id, std::string question, bool can_always,
                     std::function<void(PromptAnswer)> answered) {
  {
    std::lock_guard lock(mu_);
    waiting_.push_back(Question{std::move(id), std::move(question), can_always, std::move(answered)});
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void ExecPrompt::withdraw(const std::string& id, const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (asking_ == id) {
      withdrawn_ = why.empty() ? "decided elsewhere" : why;
    } else {
      std::erase_if(waiting_, [&](const Question& q) { return q.id == id; });
      return;
    }
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void ExecPrompt::say(const std::string& s) const { (void)!::write(tty_.get(), s.data(), s.size()); }

void ExecPrompt::run() {
  std::string line;
  bool tty_open = true;
  for (;;) {
    Question q;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      if (tty_open && !waiting_.empty()) {
        q = std::move(waiting_.front());
        waiting_.pop_front();
        asking_ = q.id;
        withdrawn_.clear();
      }
    }
    if (q.id.empty()) {
      pollfd p{wake_.get(), POLLIN, 0};
      (void)::poll(&p, 1, -1);
      uint64_t n;
      (void)!::read(wake_.get(), &n, sizeof n);
      continue;
    }
    // What was typed before the question is not its answer.
    (void)::tcflush(tty_.get(), TCIFLUSH);
    line.clear();
    const std::string choices =
        q.can_always ? "[o]nce, [a]lways (this command line, this session), [d]eny: " : "[o]nce, [d]eny: ";
    say("\r\nfaultline guard: run " + q.text + "?\r\n  " + choices);
    std::optional<PromptAnswer> answer;
    std::string ended;  // why the question ended without an answer
    while (!answer && ended.empty()) {
      pollfd p[2] = {{tty_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if (p[1].revents & POLLIN) {
        uint64_t n;
        (void)!::read(wake_.get(), &n, sizeof n);
        std::lock_guard lock(mu_);
        if (stopping_)
          ended = "the guard stops";
        else if (!withdrawn_.empty())
          ended = withdrawn_;
      }
      if (!ended.empty() || !(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[256];
      const ssize_t n = ::read(tty_.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ended = "the terminal closed; faultctl approvals decides";
        tty_open = false;
        break;
      }
      for (ssize_t i = 0; i < n && !answer; ++i) {
        if (buf[i] != '\n' && buf[i] != '\r') {
          if (line.size() < 64) line += buf[i];
          continue;
        }
        auto a = parse_prompt_answer(line);
        line.clear();
        if (a && (*a != PromptAnswer::Always || q.can_always)) {
          answer = a;
        } else {
          say("\r\n  please answer " + std::string(q.can_always ? "o, a or d: " : "o or d: "));
        }
      }
    }
    {
      std::lock_guard lock(mu_);
      asking_.clear();
      // A decision that came meanwhile wins over an answer typed after it.
      if (answer && !withdrawn_.empty()) {
        ended = withdrawn_;
        answer.reset();
      }
    }
    if (!ended.empty()) {
      say("\r\n  (" + ended + ")\r\n");
      continue;
    }
    say("\r\n");
    q.answered(*answer);
  }
}

}  // namespace faultline
