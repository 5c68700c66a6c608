// fanotify or inotify events to changes: a file written is said when it is
// closed (its size known), a delete at once, and at the end whatever is still
// open for writing.
#include "userspace/guard/fs_watch.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace faultline {
namespace {

constexpr size_t kMaxFolders = 65536;  // inotify: one watch per folder

std::string watched_fd_path(int fd) {
  char target[PATH_MAX];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target);
  if (n <= 0 || n >= static_cast<ssize_t>(sizeof target)) return {};
  return std::string(target, static_cast<size_t>(n));
}

uint64_t watched_size(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

const char* fs_change_name(FsChangeKind k) {
  switch (k) {
    case FsChangeKind::Create:
      return "create";
    case FsChangeKind::Modify:
      return "modify";
    case FsChangeKind::Delete:
      return "delete";
  }
  return "?";
}

Result<std::unique_ptr<FsWatch>> FsWatch::start(FsWatchOptions opts) {
  std::unique_ptr<FsWatch> w(new FsWatch(std::move(opts)));
  char real[PATH_MAX];
  if (::realpath(w->opts_.root.c_str(), real) == nullptr) return errno_error(w->opts_.root);
  w->opts_.root = real;
  struct stat st {};
  if (::stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) return make_error(ENOTDIR, w->opts_.root + ": not a folder");
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return errno_error("pipe");
  w->stop_pipe_[0].reset(p[0]);
  w->stop_pipe_[1].reset(p[1]);
  if (w->opts_.use_fanotify) {
    w->fd_.reset(
        ::fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_UNLIMITED_QUEUE | FAN_CLOEXEC | FAN_NONBLOCK,
                        O_RDONLY | O_CLOEXEC));
    if (!w->fd_) return errno_error("fanotify_init");
    const uint64_t mask =
        FAN_CREATE | FAN_DELETE | FAN_MODIFY | FAN_CLOSE_WRITE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ONDIR;
    if (::fanotify_mark(w->fd_.get(), FAN_MARK_ADD | FAN_MARK_FILESYSTEM, mask, AT_FDCWD, real) != 0)
      return errno_error("fanotify_mark " + w->opts_.root);
    w->mount_.reset(::open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!w->mount_) return errno_error(w->opts_.root);
    w->fanotify_ = true;
  } else {
    w->fd_.reset(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (!w->fd_) return errno_error("inotify_init1");
    FL_TRY(w->watch_tree(w->opts_.root, false));
  }
  w->thread_ = std::thread([p = w.get()] { p->run(); });
  return w;
}

FsWatch::~FsWatch() { stop(); }

void FsWatch::stop() {
  if (!thread_.joinable()) return;
  (void)!::write(stop_pipe_[1].get(), "s", 1);
  thread_.join();
}

FsTotals FsWatch::totals() const {
  std::lock_guard lock(mu_);
  FsTotals t;
  for (const auto& [path, kind] : touched_) {
    (kind == FsChangeKind::Create ? t.created : kind == FsChangeKind::Modify ? t.modified : t.deleted)++;
  }
  t.lost = lost_;
  return t;
}

void FsWatch::run() {
  for (;;) {
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {stop_pipe_[0].get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
    // Stopping: what the command did is queued already (events are queued
    // by the call that caused them); read it all, then say what is pending.
    const bool stopping = (p[1].revents & POLLIN) != 0;
    if (fanotify_) {
      read_fanotify();
    } else {
      read_inotify();
    }
    if (stopping) break;
  }
  for (const auto& [path, created] : std::map<std::string, bool>(pending_))
    say(created ? FsChangeKind::Create : FsChangeKind::Modify, path, 0);
  pending_.clear();
}

void FsWatch::read_fanotify() {
  alignas(fanotify_event_metadata) char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n <= 0) return;
    auto len = static_cast<size_t>(n);
    for (auto* m = reinterpret_cast<fanotify_event_metadata*>(buf); FAN_EVENT_OK(m, len); m = FAN_EVENT_NEXT(m, len)) {
      if (m->vers != FANOTIFY_METADATA_VERSION) return;
      if (m->mask & FAN_Q_OVERFLOW) {
        std::lock_guard lock(mu_);
        ++lost_;
        continue;
      }
      if (m->event_len < sizeof(*m) + sizeof(fanotify_event_info_fid)) continue;
      const auto* info = reinterpret_cast<const fanotify_event_info_fid*>(m + 1);
      if (info->hdr.info_type != FAN_EVENT_INFO_TYPE_DFID_NAME) continue;
      if (opts_.in_command && !opts_.in_command(m->pid)) continue;
      auto* fh = reinterpret_cast<file_handle*>(const_cast<unsigned char*>(info->handle));
      const char* name = reinterpret_cast<const char*>(fh->f_handle + fh->handle_bytes);
      // The folder by its handle (it may have moved since), then the name in it.
      UniqueFd dir(::open_by_handle_at(mount_.get(), fh, O_PATH | O_CLOEXEC));
      if (!dir) continue;  // the folder is gone too
      std::string path = watched_fd_path(dir.get());
      if (path.empty()) continue;
      if (std::strcmp(name, ".") != 0) path += (path == "/" ? "" : "/") + std::string(name);
      const bool is_dir = (m->mask & FAN_ONDIR) != 0;
      const pid_t pid = m->pid;
      // Merged events: in the order they can happen.
      if (m->mask & FAN_CREATE) on_event(Event::Create, is_dir, path, pid);
      if (m->mask & FAN_MOVED_TO) on_event(Event::MovedTo, is_dir, path, pid);
      if (m->mask & FAN_MODIFY) on_event(Event::Modify, is_dir, path, pid);
      if (m->mask & FAN_CLOSE_WRITE) on_event(Event::CloseWrite, is_dir, path, pid);
      if (m->mask & FAN_MOVED_FROM) on_event(Event::MovedFrom, is_dir, path, pid);
      if (m->mask & FAN_DELETE) on_event(Event::Delete, is_dir, path, pid);
    }
  }
}

Status FsWatch::watch_tree(const std::string& dir, bool report_files) {
  if (wd_dirs_.size() >= kMaxFolders)
    return make_error(ENOSPC, opts_.root + " has over " + std::to_string(kMaxFolders) +
                                  " folders: too many to watch with inotify (as root, fanotify has no such limit)");
  const uint32_t mask = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR |
                        IN_DONT_FOLLOW | IN_EXCL_UNLINK;
  const int wd = ::inotify_add_watch(fd_.get(), dir.c_str(), mask);
  if (wd < 0) {
    if (dir == opts_.root) return errno_error("inotify_add_watch " + dir);
    return {};  // a folder gone or unreadable below the root: not watched
  }
  wd_dirs_[wd] = dir;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return {};
  std::vector<std::pair<std::string, bool>> entries;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    const std::string path = dir + "/" + e->d_name;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st {};
      is_dir = ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    entries.emplace_back(path, is_dir);
  }
  ::closedir(d);
  for (const auto& [path, is_dir] : entries) {
    if (is_dir) {
      FL_TRY(watch_tree(path, report_files));
    } else if (report_files) {
      // In a folder made while we were not watching it yet: made by the command.
      on_event(Event::MovedTo, false, path, 0);
    }
  }
  return {};
}

void FsWatch::read_inotify() {
  alignas(inotify_event) char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n <= 0) return;
    for (char* at = buf; at < buf + n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(at);
      at += sizeof(inotify_event) + e->len;
      if (e->mask & IN_Q_OVERFLOW) {
        std::lock_guard lock(mu_);
        ++lost_;
        continue;
      }
      if (e->mask & IN_IGNORED) {
        wd_dirs_.erase(e->wd);
        continue;
      }
      auto it = wd_dirs_.find(e->wd);
      if (it == wd_dirs_.end() || e->len == 0) continue;
      const std::string path = it->second + "/" + e->name;
      const bool is_dir = (e->mask & IN_ISDIR) != 0;
      if (is_dir && (e->mask & (IN_CREATE | IN_MOVED_TO))) {
        (void)watch_tree(path, true);
        continue;
      }
      if (e->mask & IN_CREATE) on_event(Event::Create, is_dir, path, 0);
      if (e->mask & IN_MOVED_TO) on_event(Event::MovedTo, is_dir, path, 0);
      if (e->mask & IN_MODIFY) on_event(Event::Modify, is_dir, path, 0);
      if (e->mask & IN_CLOSE_WRITE) on_event(Event::CloseWrite, is_dir, path, 0);
      if (e->mask & IN_MOVED_FROM) on_event(Event::MovedFrom, is_dir, path, 0);
      if (e->mask & IN_DELETE) on_event(Event::Delete, is_dir, path, 0);
    }
  }
}

void FsWatch::on_event(Event e, bool is_dir, const std::string& path, pid_t pid) {
  if (is_dir) return;  // files are counted; folders only carry them
  if (path.size() <= opts_.root.size() + 1 || path.compare(0, opts_.root.size(), opts_.root) != 0 ||
      (opts_.root != "/" && path[opts_.root.size()] != '/'))
    return;
  if (std::find(opts_.ignore.begin(), opts_.ignore.end(), path) != opts_.ignore.end()) return;
  switch (e) {
    case Event::Create:
      pending_[path] = true;
      break;
    case Event::Modify:
      pending_.emplace(path, false);  // a file created in this run stays created
      break;
    case Event::CloseWrite:
      if (auto it = pending_.find(path); it != pending_.end()) {
        const bool created = it->second;
        pending_.erase(it);
        say(created ? FsChangeKind::Create : FsChangeKind::Modify, path, pid);
      }
      break;
    case Event::MovedTo:
      pending_.erase(path);
      say(FsChangeKind::Create, path, pid);
      break;
    case Event::MovedFrom:
    case Event::Delete:
      if (auto it = pending_.find(path); it != pending_.end()) {
        // Written and gone before it was closed: what was written is said first.
        const bool created = it->second;
        pending_.erase(it);
        say(created ? FsChangeKind::Create : FsChangeKind::Modify, path, pid);
      }
      say(FsChangeKind::Delete, path, pid);
      break;
  }
}

void FsWatch::say(FsChangeKind kind, const std::string& path, pid_t pid) {
  {
    // The net effect so far (FsTotals): created then deleted stays created;
    // deleted then made again is modified.
    std::lock_guard lock(mu_);
    auto [it, fresh] = touched_.emplace(path, kind);
    if (!fresh) {
      FsChangeKind& k = it->second;
      if (k == FsChangeKind::Modify && kind == FsChangeKind::Delete) k = FsChangeKind::Delete;
      if (k == FsChangeKind::Delete && kind != FsChangeKind::Delete) k = FsChangeKind::Modify;
    }
  }
  if (!opts_.on_change) return;
  FsChange c;
  c.kind = kind;
  c.path = "." + path.substr(opts_.root == "/" ? 0 : opts_.root.size());
  c.size = kind == FsChangeKind::Delete ? 0 : watched_size(path);
  c.pid = pid;
  opts_.on_change(c);
}

}  // namespace faultline
