// A TCP stream fault as the guarded run sees it. apply() starts a proxy in this
// process (one listener per address family the target has, on loopback), adds
// the toxics, and attaches the sockaddr programs' TCP redirect to the scope's
// cgroup (the root cgroup when host-wide): from then on every TCP connect of the
// scope to the target reaches the proxy, which recovers where it was going from
// the kernel (fl_sockops files it at connect time) and connects there itself,
// with SO_MARK FL_PROXY_MARK so that its own connects are never redirected.
// The client's getpeername() still shows the target.
//
// The end (time, breach, abort, kill switch): the redirect is detached first (new
// connects go straight to the target), then every toxic is removed, so the
// connections still open are released at once: they go on, clean, through the
// proxy. drain() lets them finish for at most the spec's drain time; the rest are
// closed when the run object goes. Registered as a session ("t3"), so status
// lists it and abort (and abort --all, the kill file) reach it; the in-kernel
// deadman (the policy's expiry) stops the redirect on time whatever happens here.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>

#include "base/cgroup.h"
#include "base/child.h"
#include "base/files.h"
#include "loader/sockaddr_object.h"
#include "userspace/faults/stream/spec.h"
#include "userspace/proxy/proxy_registry.h"
#include "userspace/run/runnable_fault.h"
#include "userspace/state/session_registry.h"

namespace faultline {

class TcpRun final : public RunnableFault {
 public:
  // warn gets the line that says why a fault could not be registered.
  TcpRun(TcpFaultSpec spec, std::ostream& warn) : spec_(std::move(spec)), warn_(warn) {}
  ~TcpRun() override;

  [[nodiscard]] std::string summary() const override { return spec_.describe(); }
  [[nodiscard]] nlohmann::json plan() const override;
  [[nodiscard]] std::string dry_run_text() const override;
  [[nodiscard]] uint32_t netns_inode() const override;
  [[nodiscard]] Result<FaultStart> apply() override;
  [[nodiscard]] std::optional<FaultEnding> check() override;
  [[nodiscard]] FaultObservation observe() override;
  [[nodiscard]] Status end(std::string_view reason) override;
  void describe_end(bool ended, FaultObservation& obs) const override;
  [[nodiscard]] std::optional<std::string> touched_nothing() const override;
  bool forward_signal(int sig) override;
  [[nodiscard]] bool wraps_command() const override { return !spec_.command.empty(); }

  // After the end: waits until no proxied connection is open, at most the
  // spec's drain time. Returns how many were still open (closed with the run).
  size_t drain();

 private:
  struct Counts {
    uint64_t redirected = 0, accepted = 0, active = 0, unrouted = 0, bytes_up = 0, bytes_down = 0;
    std::vector<ToxicActivations> toxics;  // over every family's proxy
  };
  [[nodiscard]] Counts counts() const;

  TcpFaultSpec spec_;
  std::ostream& warn_;
  // Declared in the order they must outlive each other: the cgroup outlives the
  // hooks on it; the proxy outlives the redirect to it.
  std::optional<ScopedCgroup> fresh_;
  std::unique_ptr<ProxyRegistry> proxies_;
  std::vector<std::string> proxy_names_;  // one per address family of the target
  std::vector<std::string> listen_;       // what each listens on
  std::optional<SockaddrObject> obj_;
  std::optional<TempFolder> trust_dir_;          // --terminate-tls: the command's trust files
  std::unique_ptr<ChildEnvironment> child_env_;  // and the variables that name them
  std::optional<HeldChild> child_;
  std::optional<SessionOwner> session_;
  Counts at_end_;
  bool ended_ = false;
};

}  // namespace faultline
