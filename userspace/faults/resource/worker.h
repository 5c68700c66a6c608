// A worker process of faultctl (cpu burner, memory hog) that dies with faultctl.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "base/process.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

// The child sets PR_SET_PDEATHSIG (SIGKILL) first thing, so the work stops the
// moment faultctl dies, even by kill -9; it then waits for go() so that the parent
// can record it, pin it and move it into a cgroup before it does anything.
// The body gets a descriptor to report readiness on and must never return.
class Worker {
 public:
  using Body = std::function<void(int report_fd)>;

  [[nodiscard]] static Result<Worker> start(const std::string& name, Body body);
  Worker(Worker&& o) noexcept
      : id_(std::exchange(o.id_, {})), go_(std::move(o.go_)), report_(std::move(o.report_)), reaped_(o.reaped_) {}
  Worker& operator=(Worker&&) = delete;
  Worker(const Worker&) = delete;
  ~Worker();

  [[nodiscard]] Status go();
  // The first byte the body reports, or an error on timeout or death.
  [[nodiscard]] Result<char> wait_report(int timeout_ms);
  [[nodiscard]] const ProcessIdentity& identity() const { return id_; }
  // "" while it runs, else how it ended ("killed by signal 9", "exit 1").
  [[nodiscard]] std::string exited();
  // Kills (if still running) and collects it.
  void stop();

 private:
  Worker(ProcessIdentity id, UniqueFd go, UniqueFd report) : id_(id), go_(std::move(go)), report_(std::move(report)) {}
  ProcessIdentity id_;
  UniqueFd go_;
  UniqueFd report_;
  bool reaped_ = false;
};

}  // namespace faultline
