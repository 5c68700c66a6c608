// The state folder: atomic JSON files, one lock per fault, write-ahead undo, revert.
#include "userspace/faults/resource/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/units.h"
#include "userspace/state/state_dir.h"

namespace faultline {
nlohmann::json ResourceFaultState::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  write_core(j);
  j["token"] = token;
  j["spec"] = spec;
  j["plan"] = plan;
  j["reaper"] = identity_to_json(reaper);
  j["phase"] = phase;
  j["grace_ns"] = grace_ns;
  if (!record_dir.empty()) j["record_dir"] = record_dir;
  j["undo"] = undo;
  if (!error.empty()) j["error"] = error;
  return j;
}

Result<ResourceFaultState> ResourceFaultState::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("id") || !j.contains("undo") || !j["undo"].is_array())
    return make_error(EINVAL, "not a resource fault state");
  ResourceFaultState s;
  try {
    s.read_core(j);
    s.token = j.value("token", "");
    s.spec = j.value("spec", nlohmann::json::object());
    s.plan = j.value("plan", nlohmann::json::object());
    s.reaper = identity_from_json(j.value("reaper", nlohmann::json::object()));
    s.phase = j.value("phase", "applying");
    s.grace_ns = j.value("grace_ns", uint64_t{0});
    s.record_dir = j.value("record_dir", "");
    for (const auto& a : j.at("undo")) s.undo.push_back(a);
    s.error = j.value("error", "");
  } catch (const nlohmann::json::exception& e) {
    return make_error(EINVAL, std::string("bad resource fault state: ") + e.what());
  }
  return s;
}

FaultLock::~FaultLock() {
  if (!fd_) return;
  // Whoever holds the lock of a fault whose state is gone removes the lock file;
  // IDs are never reused, so nobody will want this lock again.
  struct stat st {};
  if (::stat(state_path_.c_str(), &st) != 0 && errno == ENOENT) ::unlink(lock_path_.c_str());
}

std::string random_token() {
  unsigned char b[6] = {};
  if (::getrandom(b, sizeof(b), 0) != static_cast<ssize_t>(sizeof(b))) {
    uint64_t t = static_cast<uint64_t>(::getpid()) * 2654435761ULL ^ static_cast<uint64_t>(wall_seconds() * 1e9);
    std::memcpy(b, &t, sizeof(b));
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 15]);
  }
  return out;
}

std::string ResourceFaultStore::default_root() { return state_root(); }

Result<ResourceFaultStore> ResourceFaultStore::open(bool create) {
  std::string root = state_root();
  FL_TRY(ensure_private_dir(root, create));
  ResourceFaultStore s(root);
  FL_TRY(ensure_private_dir(s.faults_dir(), create));
  return s;
}

Result<std::string> ResourceFaultStore::allocate_id() const { return next_id(faults_dir() + "/.next-id", "r"); }

Result<FaultLock> ResourceFaultStore::lock(const std::string& id) const {
  std::string path = faults_dir() + "/" + id + ".lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot open " + path);
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return errno_error("cannot lock " + path);
  }
  return FaultLock(std::move(fd), path, state_path(id));
}

Result<ResourceFaultState> ResourceFaultStore::read(const std::string& id) const {
  auto text = read_text_file(state_path(id));
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return make_error(EINVAL, state_path(id) + " is not JSON");
  return ResourceFaultState::from_json(j);
}

std::vector<ResourceFaultState> ResourceFaultStore::list() const {
  std::vector<std::pair<uint64_t, std::string>> ids;
  DIR* d = ::opendir(faults_dir().c_str());
  if (d == nullptr) return {};
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() < 7 || n[0] != 'r' || !n.ends_with(".json")) continue;
    std::string id = n.substr(0, n.size() - 5);
    if (id.find_first_not_of("0123456789", 1) != std::string::npos) continue;
    ids.emplace_back(std::strtoull(id.c_str() + 1, nullptr, 10), id);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  std::vector<ResourceFaultState> out;
  for (const auto& [n, id] : ids) {
    if (auto s = read(id)) out.push_back(std::move(*s));
  }
  return out;
}

Status ResourceFaultStore::write(const ResourceFaultState& st) const {
  return write_file_atomic(state_path(st.id), st.to_json().dump(2) + "\n");
}

Status ResourceFaultStore::remove(const std::string& id) const {
  if (::unlink(state_path(id).c_str()) != 0 && errno != ENOENT) return errno_error("cannot remove " + state_path(id));
  return {};
}

Status UndoJournal::record(nlohmann::json action) {
  state_.undo.push_back(std::move(action));
  return store_.write(state_);
}

Status UndoJournal::amend_last(nlohmann::json action) {
  if (state_.undo.empty()) return make_error(EINVAL, "no undo action to amend");
  state_.undo.back() = std::move(action);
  return store_.write(state_);
}

namespace undo {
nlohmann::json resume(const ProcessIdentity& p) { return {{"op", "resume"}, {"pid", p.pid}, {"start", p.start}}; }
nlohmann::json thaw(const std::string& dir) { return {{"op", "thaw"}, {"cgroup", dir}}; }
nlohmann::json kill(const ProcessIdentity& p) { return {{"op", "kill"}, {"pid", p.pid}, {"start", p.start}}; }
nlohmann::json remove_cgroup(const std::string& dir) { return {{"op", "remove_cgroup"}, {"cgroup", dir}}; }
nlohmann::json unlink(const std::string& path, uint64_t dev, uint64_t ino) {
  return {{"op", "unlink"}, {"path", path}, {"dev", dev}, {"ino", ino}};
}
}  // namespace undo

Status undo_action(const nlohmann::json& a) {
  std::string op = a.value("op", "");
  if (op == "resume") {
    ProcessIdentity p = identity_from_json(a);
    if (is_alive(p) && ::kill(p.pid, SIGCONT) != 0 && errno != ESRCH)
      return errno_error("cannot resume process " + std::to_string(p.pid));
    return {};
  }
  if (op == "thaw") {
    std::string dir = a.value("cgroup", "");
    struct stat st {};
    if (dir.empty() || ::stat((dir + "/cgroup.freeze").c_str(), &st) != 0) return {};  // the cgroup is gone
    return write_text_file(dir + "/cgroup.freeze", "0");
  }
  if (op == "kill") {
    ProcessIdentity p = identity_from_json(a);
    if (!is_alive(p)) return {};
    if (::kill(p.pid, SIGKILL) != 0 && errno != ESRCH)
      return errno_error("cannot kill worker " + std::to_string(p.pid));
    for (int i = 0; i < 200 && is_alive(p); ++i) sleep_ms(10);
    if (is_alive(p)) return make_error(ETIMEDOUT, "worker " + std::to_string(p.pid) + " outlived SIGKILL for 2s");
    return {};
  }
  if (op == "remove_cgroup") return remove_cgroup(a.value("cgroup", ""));
  if (op == "unlink") {
    std::string path = a.value("path", "");
    uint64_t ino = a.value("ino", uint64_t{0}), dev = a.value("dev", uint64_t{0});
    struct stat st {};
    if (path.empty() || ::lstat(path.c_str(), &st) != 0) return {};
    // ino 0: the file was being created when its owner died; the name is ours alone.
    if (ino != 0 && (st.st_ino != ino || st.st_dev != dev)) return {};
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return errno_error("cannot delete " + path);
    return {};
  }
  return make_error(EINVAL, "unknown undo action '" + op + "'");
}

Result<bool> revert_fault(const ResourceFaultStore& store, const std::string& id, const std::string& why) {
  auto lock = store.lock(id);
  if (!lock) return lock.error();
  auto st = store.read(id);
  if (!st) {
    if (st.error().err == ENOENT) return false;
    return st.error();
  }
  std::string problems;
  for (auto it = st->undo.rbegin(); it != st->undo.rend(); ++it) {
    if (auto r = undo_action(*it); !r) problems += (problems.empty() ? "" : "; ") + r.error().describe();
  }
  if (!problems.empty()) {
    st->phase = "revert-failed";
    st->error = why + ": " + problems;
    (void)store.write(*st);
    return make_error(EIO, "fault " + id + " not fully reverted: " + problems);
  }
  FL_TRY(store.remove(id));
  return true;
}

uint64_t reaper_grace_ns() {
  constexpr uint64_t kDefault = 5'000'000'000ULL;
  const char* g = std::getenv("FAULTLINE_REAPER_GRACE");
  if (g == nullptr || *g == '\0') return kDefault;
  auto v = parse_duration_ns(g);
  if (!v || *v < 1'000'000'000ULL || *v > 60'000'000'000ULL) return kDefault;
  return *v;
}

}  // namespace faultline
