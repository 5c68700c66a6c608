// Faults and guards that live exactly as long as the faultctl process that holds
// them: syscall faults ("s3") and guards ("g2"). Their BPF links are not pinned,
// so that process is the owner and its death ends them; this registry under
// /run/faultline/sessions is how `faultctl status` finds them and `faultctl
// abort` (and the kill switch, `abort --all`) reaches them.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/result.h"
#include "userspace/state/owned_record.h"

namespace faultline {

// The core (id "s3" | "t4" | "g2", never reused; kind "syscall" | "tcp" | "guard"; summary:
// what, where, how; owner; expires_ns, 0 for a guard, which lasts as long as its
// command) is OwnedRecord's.
struct Session : OwnedRecord {
  std::string mechanism;       // "cgroup" | "lsm" | "seccomp" | "proxy" | "guard"
  uint32_t policy_map_id = 0;  // the kernel policy holding the `armed` switch; 0: none (seccomp)
  uint32_t stats_map_id = 0;   // its per-CPU counters; 0: `counters` below
  nlohmann::json counters = nlohmann::json::object();  // kept by the owner when no map holds them
  // A guard's links, pinned so that they outlive a killed owner (fail closed),
  // and the cgroup they are attached to.
  std::string pin_dir;
  // The mount namespace (its inode) the pins were made in: a bpffs mounted
  // there (under `ip netns exec`) is not in another namespace's view; 0: unknown.
  uint64_t pin_mnt_ns = 0;
  std::string cgroup;     // below the v2 hierarchy root ("/faultline-guard-N"); older records: a full path
  bool released = false;  // `abort` let go of an orphan's pins; the record waits for its cgroup to empty

  // Not stored: the owner is gone but its pinned hooks still enforce.
  bool orphaned = false;

  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] static Result<Session> from_json(const nlohmann::json& j);
};

// "s" + digits (a syscall fault), "t" + digits (a TCP stream fault) or "g" + digits (a guard).
[[nodiscard]] bool is_session_id(const std::string& id);

class SessionRegistry {
 public:
  // <state folder>/sessions (FAULTLINE_RUN_DIR, else /run/faultline); create
  // makes it. A folder someone else owns or can write to is refused.
  [[nodiscard]] static Result<SessionRegistry> open(bool create);

  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] std::string path(const std::string& id) const { return dir_ + "/" + id + ".json"; }

  [[nodiscard]] Result<std::string> allocate_id(const std::string& kind) const;
  [[nodiscard]] Status write(const Session& s) const;  // atomic
  [[nodiscard]] Status remove(const std::string& id) const;
  [[nodiscard]] Result<Session> read(const std::string& id) const;  // ENOENT once gone
  // The live sessions, by kind then number, and orphaned guards (owner killed,
  // pinned hooks still enforcing on a cgroup that still has processes). Any other
  // record of a dead owner is settled on the way: dropped (its programs went with
  // it), or for a guard whose cgroup has emptied, its pins and cgroup removed too.
  [[nodiscard]] std::vector<Session> list() const;

 private:
  explicit SessionRegistry(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// The owner's side: registers the session, hears abort requests (SIGUSR1, sent
// after the kernel side has been disarmed) and removes the record when it ends.
// One per process.
class SessionOwner {
 public:
  // Fills in id, owner, boot_id and created_wall, then writes the record.
  [[nodiscard]] static Result<SessionOwner> start(Session s);
  SessionOwner(SessionOwner&& o) noexcept;
  SessionOwner& operator=(SessionOwner&&) = delete;
  ~SessionOwner();

  [[nodiscard]] const std::string& id() const { return session_.id; }
  // `faultctl abort` asked this session to end.
  [[nodiscard]] bool abort_requested() const;
  // Owner-kept counters (seccomp): written at most once a second, and on end().
  void set_counters(nlohmann::json counters);
  // The record, to amend; save() writes it.
  [[nodiscard]] Session& session() { return session_; }
  [[nodiscard]] Status save() { return registry_.write(session_); }
  // The session is over (ended, or aborted): the record goes now.
  void end();

 private:
  SessionOwner(SessionRegistry reg, Session s) : registry_(std::move(reg)), session_(std::move(s)) {}
  SessionRegistry registry_;
  Session session_;
  double last_write_ = 0;
  bool live_ = true;
};

// Starts a session and says on err why it could not be registered (the fault
// still runs, but status and abort will not see it).
[[nodiscard]] std::optional<SessionOwner> register_session(Session s, std::ostream& err);

struct SessionAbort {
  bool was_running = false;  // false: the owner had already gone
  bool disarmed_in_kernel = false;
  bool owner_confirmed = false;  // the owner ended it and removed the record
};

// Disarms the session in the kernel (its policy's `armed` = 0, so the programs
// pass everything from this instant), then asks the owner to end it and waits up
// to 3 s for the record to go.
[[nodiscard]] Result<SessionAbort> abort_session(const SessionRegistry& reg, const std::string& id);

// Where a guard pins its links: <bpffs root>/guards/<id>.
[[nodiscard]] std::string guard_pin_dir(const std::string& id);
// The inode of the calling process's mount namespace (0 if unreadable).
[[nodiscard]] uint64_t own_mount_ns();
// Removes a guard's pin folder (its links detach if nothing else holds them) and
// the guards/ and root folders above it if they are left empty. Refuses a folder
// that is not on bpffs.
[[nodiscard]] Status remove_guard_pins(const std::string& dir);

// The kernel's ID of a BPF map (what a Session records), 0 if fd is not one.
[[nodiscard]] uint32_t map_id_of(int fd);

// A session's counters: read from its stats map, else the owner-kept ones.
[[nodiscard]] nlohmann::json session_counters(const Session& s);

}  // namespace faultline
