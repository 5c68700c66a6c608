// The file watch of `faultctl guard --watch-fs`: what the guarded command
// creates, modifies and deletes under one folder, said as it happens and
// summed up at the end. As root, fanotify (a filesystem mark, FAN_REPORT_DFID_NAME)
// with each event's pid checked against the command's process tree; as a
// user, inotify on every folder below the root, which cannot tell who acted.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

enum class FsChangeKind : uint8_t { Create, Modify, Delete };
[[nodiscard]] const char* fs_change_name(FsChangeKind k);  // "create", "modify", "delete"

// One change, said once the file is closed after writing (or deleted).
struct FsChange {
  FsChangeKind kind = FsChangeKind::Create;
  std::string path;   // below the root, as "./src/feature.go"
  uint64_t size = 0;  // at the time it was said (0 for a delete)
  int pid = 0;        // who (fanotify only; 0 when unknown)
};

// What the command did to each file it touched, by net effect: a file that
// did not exist before and does now (or was only temporary) was created, one
// that existed and still does was modified, one that existed and is gone was
// deleted.
struct FsTotals {
  uint64_t created = 0;
  uint64_t modified = 0;
  uint64_t deleted = 0;
  uint64_t lost = 0;  // events the kernel dropped (a full queue)
  [[nodiscard]] uint64_t touched() const { return created + modified + deleted; }
};

struct FsWatchOptions {
  std::string root;  // an existing folder
  // fanotify: whether the event's process is the command's (others are
  // ignored). Called on the watch's thread.
  std::function<bool(pid_t)> in_command;
  std::function<void(const FsChange&)> on_change;  // on the watch's thread
  std::vector<std::string> ignore;                 // files of the guard itself (its activity log)
  bool use_fanotify = false;                       // root: fanotify, else inotify
};

class FsWatch {
 public:
  [[nodiscard]] static Result<std::unique_ptr<FsWatch>> start(FsWatchOptions opts);
  ~FsWatch();
  FsWatch(const FsWatch&) = delete;
  FsWatch& operator=(const FsWatch&) = delete;

  // Reads what is still queued, says what is pending, stops the thread.
  void stop();
  [[nodiscard]] FsTotals totals() const;
  [[nodiscard]] bool fanotify() const { return fanotify_; }
  [[nodiscard]] const std::string& root() const { return opts_.root; }

 private:
  enum class Event : uint8_t { Create, Modify, CloseWrite, Delete, MovedFrom, MovedTo };
  explicit FsWatch(FsWatchOptions opts) : opts_(std::move(opts)) {}
  void run();
  void read_fanotify();
  void read_inotify();
  Status watch_tree(const std::string& dir, bool report_files);
  void on_event(Event e, bool is_dir, const std::string& path, pid_t pid);
  void say(FsChangeKind kind, const std::string& path, pid_t pid);

  FsWatchOptions opts_;
  bool fanotify_ = false;
  UniqueFd fd_;     // the fanotify or inotify fd
  UniqueFd mount_;  // fanotify: the root, opened (open_by_handle_at's mount fd)
  UniqueFd stop_pipe_[2];
  std::thread thread_;
  std::map<int, std::string> wd_dirs_;   // inotify: watch descriptor -> folder
  std::map<std::string, bool> pending_;  // written, not yet closed -> created in this run
  std::map<std::string, FsChangeKind> touched_;
  mutable std::mutex mu_;  // touched_ and lost_ (totals() from another thread)
  uint64_t lost_ = 0;
  bool stopped_ = false;
};

}  // namespace faultline
