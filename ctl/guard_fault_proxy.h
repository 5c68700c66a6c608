// The proxy behind `faultctl guard --fault-*`: a transparent HTTP proxy in
// faultctl's own process (outside the guard's cgroup, so its connects are not
// judged again), the redirect rules that send each faulted host's connections
// to it, and with --terminate-tls the CA and the variables that make the
// command trust it. The guard's policy decides on the original destination
// first: a connect it denies is never redirected, so never faulted.
#pragma once

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/files.h"
#include "ctl/guard_faults.h"
#include "userspace/net/egress_rules.h"
#include "userspace/proxy/proxy_registry.h"

namespace faultline {

class GuardFaultProxy {
 public:
  [[nodiscard]] static Result<std::unique_ptr<GuardFaultProxy>> start(const GuardFaults& faults, std::ostream& log);
  ~GuardFaultProxy();
  GuardFaultProxy(const GuardFaultProxy&) = delete;
  GuardFaultProxy& operator=(const GuardFaultProxy&) = delete;

  // For the guard: the redirects (after the operator's own) and the command's variables.
  [[nodiscard]] const std::vector<RedirectRule>& redirects() const { return redirects_; }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& env() const { return env_; }
  // "f1_status: 3 requests" per fault, over every family's proxy.
  void print_summary(std::ostream& log) const;

 private:
  GuardFaultProxy() = default;
  std::optional<TempFolder> trust_dir_;
  std::unique_ptr<ProxyRegistry> proxies_;
  std::vector<std::string> names_;
  std::vector<RedirectRule> redirects_;
  std::vector<std::pair<std::string, std::string>> env_;
};

}  // namespace faultline
