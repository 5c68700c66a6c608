// The spool's file: appended line by line, read back whole at start, emptied
// or rewritten only as faultcp confirms what it stored.
#include "userspace/guard/activity_spool.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>

#include "base/files.h"

namespace faultline {
namespace activity_spool_impl {

// Confirmed lines tolerated in the file before a rewrite, whatever is left.
constexpr size_t kMinRewrite = 1024;

}  // namespace activity_spool_impl

using namespace activity_spool_impl;

ActivitySpool::ActivitySpool(std::string path, UniqueFd lock, UniqueFd fd, std::deque<SpooledLine> lines)
    : path_(std::move(path)), lock_(std::move(lock)), fd_(std::move(fd)), lines_(std::move(lines)) {}

Result<std::unique_ptr<ActivitySpool>> ActivitySpool::open(const std::string& path) {
  UniqueFd lock(::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock) return errno_error(path + ".lock: cannot open the spool's lock");
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK
               ? input_error(EBUSY, path + ": another guard of this identity reports from this state folder")
               : errno_error(path + ".lock: cannot lock");
  std::deque<SpooledLine> lines;
  std::string text;
  if (::access(path.c_str(), F_OK) == 0) {
    auto t = read_text_file(path);
    if (!t) return t.error();
    text = std::move(*t);
  }
  // A last line without its newline is what a crash mid-write leaves: dropped.
  size_t whole = text.rfind('\n');
  whole = whole == std::string::npos ? 0 : whole + 1;
  for (size_t at = 0; at < whole;) {
    const size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl + 1 - at);
    at = nl + 1;
    auto j = nlohmann::json::parse(std::string_view(line).substr(0, line.size() - 1), nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("identity") || !j["identity"].is_string() ||
        !j.contains("seq") || !j["seq"].is_number_unsigned())
      return input_error(EINVAL, path + ": line " + std::to_string(lines.size() + 1) +
                                     " is not an activity line (move the file aside: faultcp never got it)");
    lines.push_back({j["identity"].get<std::string>(), j["seq"].get<uint64_t>(), std::move(line)});
  }
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (!fd) return errno_error(path + ": cannot open the activity spool");
  if (whole < text.size() && ::ftruncate(fd.get(), static_cast<off_t>(whole)) != 0)
    return errno_error(path + ": cannot cut its torn last line");
  return std::unique_ptr<ActivitySpool>(new ActivitySpool(path, std::move(lock), std::move(fd), std::move(lines)));
}

Status ActivitySpool::append(SpooledLine line) {
  std::lock_guard lock(mu_);
  FL_TRY(write_all(fd_.get(), line.line, path_));
  lines_.push_back(std::move(line));
  return {};
}

std::vector<SpooledLine> ActivitySpool::front(size_t max_entries, size_t max_bytes) const {
  std::lock_guard lock(mu_);
  std::vector<SpooledLine> out;
  size_t bytes = 0;
  for (const SpooledLine& l : lines_) {
    if (out.size() >= max_entries || (!out.empty() && bytes + l.line.size() > max_bytes)) break;
    bytes += l.line.size();
    out.push_back(l);
  }
  return out;
}

Result<size_t> ActivitySpool::drop(size_t sent, const std::map<std::string, uint64_t>& stored_through) {
  std::lock_guard lock(mu_);
  sent = std::min(sent, lines_.size());
  std::deque<SpooledLine> kept;
  size_t dropped = 0;
  for (size_t i = 0; i < sent; ++i) {
    auto it = stored_through.find(lines_[i].identity);
    if (it != stored_through.end() && lines_[i].seq <= it->second)
      ++dropped;
    else
      kept.push_back(std::move(lines_[i]));
  }
  lines_.erase(lines_.begin(), lines_.begin() + static_cast<std::ptrdiff_t>(sent));
  lines_.insert(lines_.begin(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  confirmed_in_file_ += dropped;
  FL_TRY(compact_locked());
  return dropped;
}

Status ActivitySpool::drop_first() {
  std::lock_guard lock(mu_);
  if (lines_.empty()) return {};
  lines_.pop_front();
  ++confirmed_in_file_;
  return compact_locked();
}

size_t ActivitySpool::size() const {
  std::lock_guard lock(mu_);
  return lines_.size();
}

Status ActivitySpool::compact_locked() {
  if (lines_.empty()) {
    // O_APPEND: the next line goes to the new end, 0.
    if (::ftruncate(fd_.get(), 0) != 0) return errno_error(path_ + ": cannot empty the activity spool");
    confirmed_in_file_ = 0;
    return {};
  }
  if (confirmed_in_file_ < std::max(kMinRewrite, lines_.size())) return {};
  const std::string tmp = path_ + ".tmp";
  UniqueFd out(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600));
  if (!out) return errno_error(tmp + ": cannot rewrite the activity spool");
  std::string data;
  for (const SpooledLine& l : lines_) data += l.line;
  FL_TRY(write_all(out.get(), data, tmp));
  if (::fsync(out.get()) != 0 || ::rename(tmp.c_str(), path_.c_str()) != 0)
    return errno_error(path_ + ": cannot replace the activity spool");
  fd_ = std::move(out);
  confirmed_in_file_ = 0;
  return {};
}

}  // namespace faultline
