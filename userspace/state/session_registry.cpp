// The registry of process-held faults and guards, and how `faultctl abort` ends them.
#include "userspace/state/session_registry.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ostream>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/unique_fd.h"
#include "faultline/sockaddr_abi.h"
#include "faultline/syscall_abi.h"
#include "loader/bpffs.h"
#include "loader/sockaddr_object.h"
#include "loader/syscall_lsm_object.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

std::atomic<bool> g_abort{false};
void on_abort(int) { g_abort.store(true); }

// The session's map, by ID, if it is the kind of map the record says. A live
// owner holds the map, so its ID cannot have been reused; the name check guards
// against a record that lies.
Result<UniqueFd> open_map(uint32_t id, std::initializer_list<const char*> names, bpf_map_info* out) {
  UniqueFd fd(bpf_map_get_fd_by_id(id));
  if (!fd) return errno_error("cannot open BPF map " + std::to_string(id));
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd.get(), &info, &len) != 0)
    return errno_error("cannot inspect BPF map " + std::to_string(id));
  for (const char* n : names) {
    if (std::strncmp(info.name, n, sizeof(info.name)) == 0) {
      if (out != nullptr) *out = info;
      return fd;
    }
  }
  return make_error(EINVAL, "BPF map " + std::to_string(id) + " is '" + info.name + "', not a Faultline policy");
}

Status disarm(uint32_t map_id) {
  bpf_map_info info{};
  auto fd = open_map(map_id, {"fl_sa_policy", "fl_sc_policy"}, &info);
  if (!fd) return fd.error();
  uint32_t zero = 0;
  if (std::strcmp(info.name, "fl_sa_policy") == 0) {
    fl_sa_policy p{};
    if (bpf_map_lookup_elem(fd->get(), &zero, &p) != 0) return errno_error("cannot read the socket policy");
    p.armed = 0;
    if (bpf_map_update_elem(fd->get(), &zero, &p, BPF_ANY) != 0) return errno_error("cannot disarm the socket policy");
  } else {
    fl_sc_policy p{};
    if (bpf_map_lookup_elem(fd->get(), &zero, &p) != 0) return errno_error("cannot read the syscall policy");
    p.armed = 0;
    if (bpf_map_update_elem(fd->get(), &zero, &p, BPF_ANY) != 0) return errno_error("cannot disarm the syscall policy");
  }
  return {};
}

// A recorded cgroup as a directory in our view: a full path, or a name below
// the hierarchy root (what a guard on a private cgroup2 mount records).
std::string cgroup_dir(const std::string& recorded) {
  if (recorded.empty() || recorded.rfind(cgroup_mounts().v2 + "/", 0) == 0) return recorded;
  auto dir = resolve_cgroup_v2_dir(recorded, "the recorded cgroup");
  return dir ? *dir : recorded;
}

bool has_processes(const std::string& recorded) {
  if (recorded.empty()) return false;
  auto procs = read_text_file(cgroup_dir(recorded) + "/cgroup.procs");
  return procs && procs->find_first_not_of(" \n") != std::string::npos;
}

// A guard's cgroup is removed only if it is one a guard made.
void remove_guard_cgroup(const std::string& recorded) {
  auto slash = recorded.rfind('/');
  if (slash == std::string::npos || recorded.compare(slash + 1, 16, "faultline-guard-") != 0) return;
  ::rmdir(cgroup_dir(recorded).c_str());
}

// What a dead owner left: dropped at once, or for a guard with pins, once its
// cgroup is empty. True while the record must stand.
bool settle(const SessionRegistry& reg, Session& s, bool same_boot) {
  if (same_boot && (!s.pin_dir.empty() || s.released)) {
    if (has_processes(s.cgroup)) {
      struct stat st {};
      // Pins made in another mount namespace may be out of our view: they
      // stand for as long as the cgroup has processes (the command keeps that
      // namespace alive), so the guard counts as orphaned without a look.
      const bool out_of_view = s.pin_mnt_ns != 0 && s.pin_mnt_ns != own_mount_ns();
      s.orphaned = !s.released && (::stat(s.pin_dir.c_str(), &st) == 0 || out_of_view);
      return true;
    }
    if (!s.pin_dir.empty() && !remove_guard_pins(s.pin_dir).ok()) return true;
    remove_guard_cgroup(s.cgroup);
  }
  (void)reg.remove(s.id);
  return false;
}

}  // namespace

std::string guard_pin_dir(const std::string& id) { return bpffs_layout().root + "/guards/" + id; }

uint64_t own_mount_ns() {
  struct stat st {};
  return ::stat("/proc/self/ns/mnt", &st) == 0 ? st.st_ino : 0;
}

Status remove_guard_pins(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return errno == ENOENT ? Status{} : errno_error("cannot inspect " + dir);
  if (fs.f_type != BPF_FS_MAGIC) return make_error(EINVAL, "refusing to remove " + dir + ": not on a bpf filesystem");
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ::unlinkat(::dirfd(d), e->d_name, 0);
    }
    ::closedir(d);
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return errno_error("cannot remove " + dir);
  std::string guards = dir.substr(0, dir.rfind('/'));
  if (::rmdir(guards.c_str()) == 0) ::rmdir(guards.substr(0, guards.rfind('/')).c_str());  // only if empty
  return {};
}

nlohmann::json Session::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  write_core(j);
  j["mechanism"] = mechanism;
  j["policy_map_id"] = policy_map_id;
  j["stats_map_id"] = stats_map_id;
  j["counters"] = counters;
  if (!pin_dir.empty()) j["pin_dir"] = pin_dir;
  if (pin_mnt_ns != 0) j["pin_mnt_ns"] = pin_mnt_ns;
  if (!cgroup.empty()) j["cgroup"] = cgroup;
  if (released) j["released"] = true;
  return j;
}

Result<Session> Session::from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("id") || !j.contains("owner")) return make_error(EINVAL, "not a session record");
  Session s;
  try {
    s.read_core(j);
    s.mechanism = j.value("mechanism", "");
    s.policy_map_id = j.value("policy_map_id", 0U);
    s.stats_map_id = j.value("stats_map_id", 0U);
    s.counters = j.value("counters", nlohmann::json::object());
    s.pin_dir = j.value("pin_dir", "");
    s.pin_mnt_ns = j.value("pin_mnt_ns", uint64_t{0});
    s.cgroup = j.value("cgroup", "");
    s.released = j.value("released", false);
  } catch (const nlohmann::json::exception& e) {
    return make_error(EINVAL, std::string("bad session record: ") + e.what());
  }
  if (!is_session_id(s.id)) return make_error(EINVAL, "bad session record: id '" + s.id + "'");
  return s;
}

bool is_session_id(const std::string& id) {
  return id.size() >= 2 && id.size() <= 12 && (id[0] == 's' || id[0] == 'g' || id[0] == 't') &&
         id.find_first_not_of("0123456789", 1) == std::string::npos;
}

Result<SessionRegistry> SessionRegistry::open(bool create) {
  std::string root = state_root();
  FL_TRY(ensure_private_dir(root, create));
  std::string dir = root + "/sessions";
  FL_TRY(ensure_private_dir(dir, create));
  return SessionRegistry(dir);
}

Result<std::string> SessionRegistry::allocate_id(const std::string& kind) const {
  const std::string prefix = kind == "guard" ? "g" : kind == "tcp" ? "t" : "s";
  return next_id(dir_ + "/.next-" + prefix, prefix);
}

Status SessionRegistry::write(const Session& s) const {
  return write_file_atomic(path(s.id), s.to_json().dump(2) + "\n");
}

Status SessionRegistry::remove(const std::string& id) const {
  if (::unlink(path(id).c_str()) != 0 && errno != ENOENT) return errno_error("cannot remove " + path(id));
  return {};
}

Result<Session> SessionRegistry::read(const std::string& id) const {
  auto text = read_text_file(path(id));
  if (!text) return text.error();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return make_error(EINVAL, path(id) + " is not JSON");
  return Session::from_json(j);
}

std::vector<Session> SessionRegistry::list() const {
  std::vector<std::pair<std::pair<char, uint64_t>, std::string>> ids;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return {};
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (!n.ends_with(".json")) continue;
    std::string id = n.substr(0, n.size() - 5);
    if (!is_session_id(id)) continue;
    ids.push_back({{id[0] == 's' ? 0 : id[0] == 't' ? 1 : 2, std::strtoull(id.c_str() + 1, nullptr, 10)}, id});
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  const std::string boot = boot_id();
  std::vector<Session> out;
  for (const auto& [key, id] : ids) {
    auto s = read(id);
    if (!s) continue;
    const bool same_boot = s->boot_id == boot;
    if ((!same_boot || !is_alive(s->owner)) && (!settle(*this, *s, same_boot) || !s->orphaned)) continue;
    out.push_back(std::move(*s));
  }
  return out;
}

Result<SessionOwner> SessionOwner::start(Session s) {
  auto reg = SessionRegistry::open(true);
  if (!reg) return reg.error();
  auto id = reg->allocate_id(s.kind);
  if (!id) return id.error();
  auto me = read_process(::getpid());
  if (!me) return me.error();
  s.id = *id;
  s.owner = me->identity();
  s.boot_id = boot_id();
  s.created_wall = wall_seconds();
  g_abort.store(false);
  struct sigaction sa {};
  sa.sa_handler = on_abort;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
  FL_TRY(reg->write(s));
  return SessionOwner(std::move(*reg), std::move(s));
}

SessionOwner::SessionOwner(SessionOwner&& o) noexcept
    : registry_(std::move(o.registry_)), session_(std::move(o.session_)), last_write_(o.last_write_), live_(o.live_) {
  o.live_ = false;
}

SessionOwner::~SessionOwner() {
  if (!live_) return;
  end();
  signal(SIGUSR1, SIG_DFL);
}

bool SessionOwner::abort_requested() const { return g_abort.load(); }

void SessionOwner::set_counters(nlohmann::json counters) {
  session_.counters = std::move(counters);
  double now = wall_seconds();
  if (!live_ || now - last_write_ < 1.0) return;
  last_write_ = now;
  (void)registry_.write(session_);
}

void SessionOwner::end() {
  if (!live_) return;
  (void)registry_.remove(session_.id);
  live_ = false;
}

std::optional<SessionOwner> register_session(Session s, std::ostream& err) {
  auto owner = SessionOwner::start(std::move(s));
  if (!owner) {
    err << "faultctl: warning: not registered in the state folder (" << owner.error().describe()
        << "): faultctl status will not list this and faultctl abort cannot reach it\n";
    return std::nullopt;
  }
  return std::move(*owner);
}

Result<SessionAbort> abort_session(const SessionRegistry& reg, const std::string& id) {
  auto s = reg.read(id);
  if (!s) return s.error();
  SessionAbort out;
  if (s->boot_id != boot_id() || !is_alive(s->owner)) {
    if (!settle(reg, *s, s->boot_id == boot_id()) || !s->orphaned) return out;
    // A killed guard's pinned hooks: disarm, then unpin, which detaches them.
    // The record stays (released) until the cgroup empties, to remove it then.
    out.was_running = true;
    FL_TRY(disarm(s->policy_map_id));
    out.disarmed_in_kernel = true;
    FL_TRY(remove_guard_pins(s->pin_dir));
    s->released = true;
    FL_TRY(reg.write(*s));
    out.owner_confirmed = true;
    return out;
  }
  out.was_running = true;
  // The kernel first: from here on the programs pass everything, whatever the
  // owner does next.
  if (s->policy_map_id != 0) {
    FL_TRY(disarm(s->policy_map_id));
    out.disarmed_in_kernel = true;
  }
  if (::kill(s->owner.pid, SIGUSR1) != 0 && errno != ESRCH)
    return errno_error("cannot signal the owner of " + id + " (pid " + std::to_string(s->owner.pid) + ")");
  for (int i = 0; i < 300; ++i) {
    if (::access(reg.path(id).c_str(), F_OK) != 0 || !is_alive(s->owner)) {
      out.owner_confirmed = true;
      (void)reg.remove(id);
      break;
    }
    sleep_ms(10);
  }
  return out;
}

uint32_t map_id_of(int fd) {
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

namespace {

// A syscall fault's brakes as its kernel policy counts them (cgroup and LSM
// rungs): the cap and how many calls it spared. Nothing without a cap, or for
// a policy from before the brakes (a shorter value leaves budget zeroed).
void add_cap_counters(const Session& s, nlohmann::json& counters) {
  if (s.kind != "syscall" || s.policy_map_id == 0) return;
  bpf_map_info info{};
  auto fd = open_map(s.policy_map_id, {"fl_sa_policy", "fl_sc_policy"}, &info);
  if (!fd) return;
  uint32_t zero = 0;
  fl_call_budget b{};
  if (std::strcmp(info.name, "fl_sa_policy") == 0) {
    fl_sa_policy p{};
    if (bpf_map_lookup_elem(fd->get(), &zero, &p) != 0) return;
    b = p.inject_budget;
  } else {
    fl_sc_policy p{};
    if (bpf_map_lookup_elem(fd->get(), &zero, &p) != 0) return;
    b = p.budget;
  }
  if (b.max == 0) return;
  counters["cap"] = b.max;
  counters["cap_spared"] = b.claimed > b.max ? b.claimed - b.max : 0;
}

nlohmann::json kernel_counters(const Session& s);

}  // namespace

nlohmann::json session_counters(const Session& s) {
  nlohmann::json c = kernel_counters(s);
  add_cap_counters(s, c);
  return c;
}

namespace {

nlohmann::json kernel_counters(const Session& s) {
  if (s.stats_map_id == 0) return s.counters;
  bpf_map_info info{};
  auto fd = open_map(s.stats_map_id, {"fl_sa_stats", "fl_sc_stats"}, &info);
  if (!fd) return s.counters;
  if (std::strcmp(info.name, "fl_sa_stats") == 0) {
    auto t = sum_sa_stats(fd->get());
    if (!t) return s.counters;
    if (s.kind == "syscall") return {{"failed", t->injected}};
    if (s.kind == "tcp") {  // the owner keeps the proxy's counters; the kernel the redirects
      nlohmann::json c = s.counters;
      c["redirected"] = t->redirected;
      return c;
    }
    return {{"allowed", t->allowed},
            {"denied", t->denied},
            {"would_deny", t->would_deny},
            {"exfil_dropped", t->exfil_dropped},
            {"redirected", t->redirected}};
  }
  auto t = sum_sc_stats(fd->get());
  if (!t) return s.counters;
  uint64_t seen = 0, injected = 0;
  for (int i = 0; i < FL_SC_OP_MAX; ++i) {
    seen += t->seen[i];
    injected += t->injected[i];
  }
  return {{"failed", injected}, {"passed", seen - injected}};
}

}  // namespace

}  // namespace faultline
