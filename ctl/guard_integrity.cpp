// The integrity watch of faultctl guard: a thread that re-checks the
// baselines, and how a change is said.
#include "ctl/guard_integrity.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

// The real path of a file that may be gone: its folder's real path and its name.
std::string real_file_path(const std::string& p) {
  const size_t slash = p.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
  char real[PATH_MAX];
  if (::realpath(dir.c_str(), real) == nullptr) return p;
  const std::string r = real;
  return (r == "/" ? "" : r) + "/" + p.substr(slash == std::string::npos ? 0 : slash + 1);
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
  const bool attributed = ::geteuid() == 0 && g->attribute(log);
  log << "faultline guard: integrity: " << g->baseline_.files() << " file(s) of " << g->baseline_.paths().size()
      << " path(s) hashed (SHA-256), re-checked every " << o.interval.count() << " ms and at exit; "
      << (attributed ? "a change by the command's processes is a note, anyone else's a finding"
                     : "any change counts, the command's own too (nothing tells who made it)")
      << "\n";
  g->thread_ = std::thread([p = g.get()] { p->run(); });
  return g;
}

GuardIntegrity::~GuardIntegrity() {
  for (auto& w : watches_) w->stop();  // their callbacks use written_
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool GuardIntegrity::attribute(std::ostream& log) {
  auto tree = CommandTree::listen();
  if (!tree) {
    log << "faultline guard: integrity: the process connector is not available (" << tree.error().describe()
        << "): every change counts\n";
    return false;
  }
  tree_ = std::move(*tree);
  std::set<std::string> folders;
  for (const std::string& p : baseline_.paths()) {
    char whole[PATH_MAX];
    real_paths_.push_back(::realpath(p.c_str(), whole) != nullptr ? std::string(whole) : real_file_path(p));
    struct stat st {};
    const bool dir = ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    const size_t slash = p.rfind('/');
    const std::string folder = dir ? p : slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
    char real[PATH_MAX];
    if (::realpath(folder.c_str(), real) != nullptr) folders.insert(real);
  }
  for (const std::string& f : folders) {
    FsWatchOptions w;
    w.root = f;
    w.use_fanotify = true;
    w.in_command = [t = tree_.get()](pid_t pid) { return t->contains(pid); };
    w.on_change = [this, root = f](const FsChange& c) {
      const std::string full = (root == "/" ? "" : root) + c.path.substr(1);  // "./x" below root
      bool covered = false;
      for (const std::string& p : real_paths_)
        covered = covered || full == p ||
                  (full.size() > p.size() && full.compare(0, p.size(), p) == 0 && full[p.size()] == '/');
      if (!covered) return;
      std::string digest = c.kind == FsChangeKind::Delete ? std::string() : integrity_digest(full);
      std::lock_guard lock(written_mu_);
      written_[full] = std::move(digest);
    };
    auto watch = FsWatch::start(std::move(w));
    if (!watch) {
      log << "faultline guard: integrity: fanotify cannot watch " << f << " (" << watch.error().describe()
          << "): every change counts\n";
      watches_.clear();
      tree_.reset();
      return false;
    }
    watches_.push_back(std::move(*watch));
  }
  return true;
}

void GuardIntegrity::forked(pid_t pid) {
  if (tree_) tree_->set_root(pid);
}

bool GuardIntegrity::by_command(const IntegrityChange& c) {
  if (!tree_) return false;
  const std::string real = real_file_path(c.path);
  // The write's event is read by the watch's thread: a moment to catch up.
  for (int i = 0; i < 10; ++i) {
    {
      std::lock_guard lock(written_mu_);
      auto it = written_.find(real);
      if (it != written_.end() && it->second == c.after) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
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
    const std::string what = describe(c);
    if (by_command(c)) {
      ++notes_;
      const std::string note = "faultline guard: integrity: note: " + what + ", by the command\n";
      std::cerr.write(note.data(), static_cast<std::streamsize>(note.size())).flush();
      continue;
    }
    ++changes_;
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
  for (auto& w : watches_) w->stop();  // what is still queued read first
  check();
  log << "faultline guard: integrity: " << checks_ << " check(s), " << changes_ << " change(s) of "
      << baseline_.paths().size() << " watched path(s)";
  if (tree_) log << ", " << notes_ << " by the command itself";
  log << "\n";
}

}  // namespace faultline
