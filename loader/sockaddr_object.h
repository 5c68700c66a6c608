// The sockaddr BPF object: one private instance per scope (a cgroup), never pinned,
// so its programs detach when the owning process exits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "faultline/sockaddr_abi.h"
#include "loader/bpf_link.h"
#include "loader/bpf_skeleton.h"
#include "base/result.h"

struct fl_sockaddr;  // the bpftool skeleton

namespace faultline {

// The counters of a sockaddr instance (its fl_sa_stats map, by fd), summed over CPUs.
[[nodiscard]] Result<fl_sa_stats> sum_sa_stats(int stats_fd);

class SockaddrObject {
 public:
  // rule_slots: how many allow/deny rules get a hit counter (ids 0..slots-1).
  [[nodiscard]] static Result<SockaddrObject> load(uint32_t rule_slots = 1);
  SockaddrObject(SockaddrObject&&) noexcept;
  SockaddrObject& operator=(SockaddrObject&&) noexcept;
  ~SockaddrObject();

  // Attaches every hook (connect, sendmsg, bind, sock_create, cgroup_skb) to
  // the cgroup; the links live as long as this object. With redirect, also the
  // getpeername and recvmsg hooks that hide a redirect from the application:
  // they cost every getpeername() and UDP recvfrom() of the cgroup a lookup, so
  // only a scope with redirect rules gets them.
  [[nodiscard]] Status attach(int cgroup_fd, bool redirect = false);
  void detach() {
    links_.clear();
    link_names_.clear();
  }

  // Pins every attached link in dir (created, mode 0700; it must be on bpffs), so
  // that the hooks outlive this process: a killed guard keeps enforcing. The
  // pins are removed by unpin_links(), or by whoever finds them orphaned.
  [[nodiscard]] Status pin_links(const std::string& dir);
  void unpin_links();

  [[nodiscard]] int policy_fd() const;
  [[nodiscard]] int deny_fd() const;
  [[nodiscard]] int allow_fd() const;
  [[nodiscard]] int events_fd() const;
  [[nodiscard]] int stats_fd() const;
  [[nodiscard]] int rng_fd() const;
  [[nodiscard]] int flows_fd() const;
  [[nodiscard]] int redirect_fd() const;
  // Hits of each allow/deny rule, summed over CPUs, by rule id.
  [[nodiscard]] Result<std::vector<uint64_t>> rule_hits() const;

 private:
  explicit SockaddrObject(BpfSkeleton<fl_sockaddr> skel);
  BpfSkeleton<fl_sockaddr> skel_;
  std::vector<BpfLink> links_;
  std::vector<std::string> link_names_;  // the program of each link, for its pin
  std::string pin_dir_;
};

}  // namespace faultline
