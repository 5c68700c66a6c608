// The integrity watch of faultctl guard: a thread that re-checks the
// baselines, and how a change is said.
#include "ctl/guard_integrity.h"

#include <iostream>

#include "userspace/guard/guard_judge.h"

namespace faultline {
namespace {

// The first 12 hex digits and "...", or the reason a file was unreadable.
std::string short_digest(const std::string& d) { return d.size() == 64 ? d.substr(0, 12) + "..." : d; }

std::string describe(const IntegrityChange& c) {
  std::string s = c.path + " " + integrity_change_name(c.kind) + " (sha256 ";
  switch (c.kind) {
    case IntegrityChangeKind::created:
      s += short_digest(c.after);
      break;
    case IntegrityChangeKind::modified:
      s += short_digest(c.before) + " -> " + short_digest(c.after);
      break;
    case IntegrityChangeKind::removed:
      s += "was " + short_digest(c.before);
      break;
  }
  return s + ")";
}

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

Result<std::unique_ptr<GuardIntegrity>> GuardIntegrity::start(const GuardIntegrityOptions& o, GuardJudge* judge,
                                                              std::ostream& log) {
  auto baseline = IntegrityBaseline::take(o.paths);
  if (!baseline) return input_error(baseline.error().err, "--integrity: " + baseline.error().message);
  std::unique_ptr<GuardIntegrity> g(new GuardIntegrity(std::move(*baseline), o.interval, judge));
  log << "faultline guard: integrity: " << g->baseline_.files() << " file(s) of " << g->baseline_.paths().size()
      << " path(s) hashed (SHA-256), re-checked every " << o.interval.count() << " ms and at exit; any change "
      << "counts, the command's own too (nothing tells who made it)\n";
  g->thread_ = std::thread([p = g.get()] { p->run(); });
  return g;
}

GuardIntegrity::~GuardIntegrity() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GuardIntegrity::run() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    check();
    lock.lock();
  }
}

void GuardIntegrity::check() {
  ++checks_;
  for (const IntegrityChange& c : baseline_.recheck()) {
    ++changes_;
    const std::string what = describe(c);
    const std::string line = "faultline guard: integrity: " + what + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size())).flush();
    if (judge_ != nullptr) judge_->record_integrity(upper(integrity_change_name(c.kind)), c.path, what);
  }
}

void GuardIntegrity::finish(std::ostream& log) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  check();
  log << "faultline guard: integrity: " << checks_ << " check(s), " << changes_ << " change(s) of "
      << baseline_.paths().size() << " watched path(s)\n";
}

}  // namespace faultline
