// Host resource faults: ProcessFault, CpuBurn, MemoryHog, DiskFill behind one interface.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/process.h"
#include "base/result.h"
#include "userspace/faults/resource/spec.h"
#include "userspace/faults/resource/store.h"
#include "userspace/faults/resource/worker.h"

namespace faultline {

// The life cycle every kind follows. plan() (the static factory of each kind)
// resolves the spec against the running system and touches nothing: its errors are
// bad input and name the flag. apply() makes the change, recording each undo
// action in the journal *before* the change it undoes. Reverting is not a method
// here: it is revert_fault() over the journal, the same code whoever reverts.
class ResourceFault {
 public:
  virtual ~ResourceFault() = default;
  [[nodiscard]] const ResourceSpec& spec() const { return spec_; }

  // What --dry-run prints and the state and the record keep.
  [[nodiscard]] virtual nlohmann::json plan() const = 0;
  [[nodiscard]] virtual Status apply(UndoJournal& journal) = 0;
  // What can be seen right now; "text" is the status-line part for people.
  [[nodiscard]] virtual nlohmann::json observe() = 0;
  // An error once the fault stopped holding by itself (a worker died, the balloon
  // was deleted): the run ends early and says why.
  [[nodiscard]] virtual Status check() { return {}; }
  // After the revert: collect our worker processes.
  virtual void release() {}

 protected:
  explicit ResourceFault(ResourceSpec spec) : spec_(std::move(spec)) {}
  ResourceSpec spec_;
};

[[nodiscard]] Result<std::unique_ptr<ResourceFault>> plan_resource_fault(const ResourceSpec& spec);

// process: freeze (cgroup v2 cgroup.freeze where the target has a cgroup of its
// own, else SIGSTOP; resumed at the end) or one signal.
class ProcessFault : public ResourceFault {
 public:
  struct Target {
    ProcessInfo info;
    std::string method;  // "sigstop" | "cgroup-freeze" | "signal"
    std::string cgroup;  // for cgroup-freeze
  };
  [[nodiscard]] static Result<std::unique_ptr<ProcessFault>> plan(const ResourceSpec& spec);
  [[nodiscard]] nlohmann::json plan() const override;
  [[nodiscard]] Status apply(UndoJournal& journal) override;
  [[nodiscard]] nlohmann::json observe() override;

 private:
  using ResourceFault::ResourceFault;
  std::vector<Target> targets_;
  std::string cgroup_dir_;  // --cgroup, resolved
};

// cpu: one worker per core, pinned, at a duty cycle.
class CpuBurn : public ResourceFault {
 public:
  [[nodiscard]] static Result<std::unique_ptr<CpuBurn>> plan(const ResourceSpec& spec);
  [[nodiscard]] nlohmann::json plan() const override;
  [[nodiscard]] Status apply(UndoJournal& journal) override;
  [[nodiscard]] nlohmann::json observe() override;
  [[nodiscard]] Status check() override;
  void release() override;

 private:
  using ResourceFault::ResourceFault;
  std::vector<int> cores_;
  std::string cgroup_dir_;
  std::vector<Worker> workers_;
  std::vector<uint64_t> last_ticks_, first_ticks_;
  uint64_t last_ns_ = 0, first_ns_ = 0;
};

// memory: one hog in a cgroup of its own whose limit is the size asked (plus the
// hog's own small overhead), so it can never take more.
class MemoryHog : public ResourceFault {
 public:
  static constexpr uint64_t kOverheadBytes = 16ULL << 20;
  [[nodiscard]] static Result<std::unique_ptr<MemoryHog>> plan(const ResourceSpec& spec);
  [[nodiscard]] nlohmann::json plan() const override;
  [[nodiscard]] Status apply(UndoJournal& journal) override;
  [[nodiscard]] nlohmann::json observe() override;
  [[nodiscard]] Status check() override;
  void release() override;

 private:
  using ResourceFault::ResourceFault;
  int cgroup_version_ = 0;
  std::string parent_dir_;
  std::string dir_;
  std::optional<Worker> hog_;
};

// disk: one balloon file, fallocate'd (written where fallocate is unsupported).
class DiskFill : public ResourceFault {
 public:
  [[nodiscard]] static Result<std::unique_ptr<DiskFill>> plan(const ResourceSpec& spec);
  [[nodiscard]] nlohmann::json plan() const override;
  [[nodiscard]] Status apply(UndoJournal& journal) override;
  [[nodiscard]] nlohmann::json observe() override;
  [[nodiscard]] Status check() override;

 private:
  using ResourceFault::ResourceFault;
  uint64_t balloon_bytes_ = 0;
  double use_before_ = 0;
  double use_after_ = 0;
  uint64_t free_after_ = 0;
  std::string balloon_;
};

// File system numbers as df shows them: use% = used / (used + available to users).
struct FsUsage {
  uint64_t block = 0;      // f_frsize
  uint64_t used = 0;       // bytes
  uint64_t available = 0;  // bytes an unprivileged writer may still use
  [[nodiscard]] double use_percent() const;
};
[[nodiscard]] Result<FsUsage> fs_usage(const std::string& path);

// The balloon that takes the file system to the spec's --fill or --size, checked
// against the --min-free floor; errors name the flag. Exposed for tests.
[[nodiscard]] Result<uint64_t> balloon_bytes(const ResourceSpec& spec, const FsUsage& fs);

}  // namespace faultline
