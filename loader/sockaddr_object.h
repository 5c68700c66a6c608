// The sockaddr BPF object: one private instance per scope (a cgroup), never pinned,
// so its programs detach when the owning process exits.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "faultline/sockaddr_abi.h"
#include "loader/bpf_link.h"
#include "loader/bpf_skeleton.h"
#include "loader/features.h"

struct fl_sockaddr;  // the bpftool skeleton
struct bpf_program;

namespace faultline {

// The counters of a sockaddr instance (its fl_sa_stats map, by fd), summed over CPUs.
[[nodiscard]] Result<fl_sa_stats> sum_sa_stats(int stats_fd);

// Where the client of a redirected TCP connection asked to go.
struct RedirectedConn {
  fl_addr orig{};          // IPv4 mapped, as fl_addr always is
  uint16_t orig_port = 0;  // host order
};

// The file name of a scope's connection map among its pinned links.
inline constexpr const char* kRedirectedConnsPin = "redirected_conns";

// Looks up, and takes (deletes), the connection a proxy has accepted in a
// scope's connection map (SockaddrObject::redirected_conns_fd(), or the pin
// kRedirectedConnsPin in the scope's pin folder): peer and local are the
// accepted socket's getpeername() and getsockname(), AF_INET or AF_INET6
// (v4-mapped or not). Nothing when the connection was not redirected there.
[[nodiscard]] Result<std::optional<RedirectedConn>> take_redirected_conn(int conns_fd, const sockaddr* peer,
                                                                         const sockaddr* local);

// Whether the DNS learner (fl_dns_ingress, the program host rules learn
// addresses with) loads on this kernel: a real load of an applied instance,
// once per process. The detail names the kernel and, when it does not load,
// the loader's error.
[[nodiscard]] const FeatureProbe& dns_learner_probe();

class SockaddrObject {
 public:
  // rule_slots: how many allow/deny rules get a hit counter (ids 0..slots-1).
  [[nodiscard]] static Result<SockaddrObject> load(uint32_t rule_slots = 1);
  // An instance for an applied policy (faultctl policy apply): the hooks take
  // the policy, tries and counters of the generation gen_fd names (the one
  // fl_sa_gen map every applied scope shares), not the single maps. Without
  // dns_learner, fl_dns_ingress is not loaded (nor attached): the instance
  // judges address rules only, and host rules learn nothing.
  [[nodiscard]] static Result<SockaddrObject> load_applied(int gen_fd, bool dns_learner = true);
  SockaddrObject(SockaddrObject&&) noexcept;
  SockaddrObject& operator=(SockaddrObject&&) noexcept;
  ~SockaddrObject();

  // Attaches every hook (connect, sendmsg, bind, sock_create, cgroup_skb) to
  // the cgroup; the links live as long as this object. With redirect, also the
  // getpeername and recvmsg hooks that hide a redirect from the application:
  // they cost every getpeername() and UDP recvfrom() of the cgroup a lookup, so
  // only a scope with redirect rules gets them, with the sockops program that
  // files each redirected TCP connection for the proxy (redirected_conns_fd).
  [[nodiscard]] Status attach(int cgroup_fd, bool redirect = false);
  // Only what a redirect of TCP connections needs (connect, getpeername and
  // sockops): a TCP stream fault's interception, cheap enough for the root
  // cgroup (host-wide). No policy, accounting or byte counting hooks.
  [[nodiscard]] Status attach_tcp_redirect(int cgroup_fd);
  // What an applied policy judges: connect, sendmsg and the cgroup_skb
  // accounting (the exfil cap), and the DNS answers its host rules learn
  // addresses from (fl_dns_ingress, when loaded). No errno injection, no redirect.
  [[nodiscard]] Status attach_applied(int cgroup_fd);
  // Pins the generation maps of an applied instance beside its links (see
  // pin_links), and lets every pin outlive this object: an applied policy
  // stays when faultctl exits.
  [[nodiscard]] Status pin_applied(const std::string& dir);
  void detach() {
    links_.clear();
    link_names_.clear();
  }

  // Pins every attached link in dir (created, mode 0700; it must be on bpffs), so
  // that the hooks outlive this process: a killed guard keeps enforcing. With
  // redirect hooks attached, the connection map too (kRedirectedConnsPin), for
  // a proxy in another process. The pins are removed by unpin_links(), or by
  // whoever finds them orphaned.
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
  [[nodiscard]] int redirected_conns_fd() const;
  [[nodiscard]] int gpolicy_fd() const;
  [[nodiscard]] int gdeny_fd() const;
  [[nodiscard]] int gallow_fd() const;
  [[nodiscard]] int ghits_fd() const;
  [[nodiscard]] int gen_fd() const;
  // Host rules of an applied instance (bpf/lib/dns_learn.bpf.h): the watched
  // names, the learned addresses, the learning counters, and the learning
  // program (for BPF_PROG_TEST_RUN).
  [[nodiscard]] int dns_watch_fd() const;
  [[nodiscard]] int dns_learn_fd() const;
  [[nodiscard]] int dns_stats_fd() const;
  [[nodiscard]] int dns_ingress_fd() const;
  // Hits of each allow/deny rule, summed over CPUs, by rule id.
  [[nodiscard]] Result<std::vector<uint64_t>> rule_hits() const;

 private:
  explicit SockaddrObject(BpfSkeleton<fl_sockaddr> skel);
  [[nodiscard]] Status attach_programs(int cgroup_fd, const std::vector<bpf_program*>& progs);
  BpfSkeleton<fl_sockaddr> skel_;
  std::vector<BpfLink> links_;
  std::vector<std::string> link_names_;  // the program of each link, for its pin
  std::string pin_dir_;
  bool conns_pinned_ = false;
};

}  // namespace faultline
