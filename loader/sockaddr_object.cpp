// Skeleton lifecycle for sockaddr.bpf.c and its cgroup attachments.
#include "loader/sockaddr_object.h"

#include <bpf/bpf.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstring>

#include "base/unique_fd.h"
#include "loader/features.h"
#include "loader/map_ops.h"
#include "sockaddr.skel.h"

namespace faultline {

Result<fl_sa_stats> sum_sa_stats(int stats_fd) {
  auto sum = sum_percpu<fl_sa_stats>(stats_fd, 0, [](fl_sa_stats& t, const fl_sa_stats& p) {
    t.allowed += p.allowed;
    t.denied += p.denied;
    t.would_deny += p.would_deny;
    t.injected += p.injected;
    t.exfil_dropped += p.exfil_dropped;
    t.events_lost += p.events_lost;
    t.redirected += p.redirected;
  });
  if (!sum) return make_error(sum.error().err, "cannot read the socket policy counters");
  return sum;
}

namespace {

// An address as the programs key it: IPv4 mapped into ::ffff:0:0/96.
bool key_addr(const sockaddr* sa, fl_addr* a, uint16_t* port_be) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    std::memset(a, 0, sizeof(*a));
    a->b[10] = 0xff;
    a->b[11] = 0xff;
    std::memcpy(&a->b[12], &in->sin_addr, 4);
    *port_be = in->sin_port;
    return true;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::memcpy(a->b, &in6->sin6_addr, 16);
    *port_be = in6->sin6_port;
    return true;
  }
  return false;
}

}  // namespace

Result<std::optional<RedirectedConn>> take_redirected_conn(int conns_fd, const sockaddr* peer, const sockaddr* local) {
  fl_sa_conn_key k{};
  if (!key_addr(peer, &k.client, &k.client_port) || !key_addr(local, &k.target, &k.target_port))
    return make_error(EAFNOSUPPORT, "a redirected connection is IPv4 or IPv6");
  fl_sa_orig o{};
  if (bpf_map_lookup_and_delete_elem(conns_fd, &k, &o) != 0) {
    if (errno == ENOENT) return std::optional<RedirectedConn>{};
    return errno_error("cannot read the redirected connections");
  }
  return std::optional<RedirectedConn>{RedirectedConn{o.orig, ntohs(o.orig_port)}};
}

SockaddrObject::SockaddrObject(BpfSkeleton<fl_sockaddr> skel) : skel_(std::move(skel)) {}
SockaddrObject::SockaddrObject(SockaddrObject&&) noexcept = default;
SockaddrObject& SockaddrObject::operator=(SockaddrObject&&) noexcept = default;

Result<SockaddrObject> SockaddrObject::load(uint32_t rule_slots) {
  auto opened = BpfSkeleton<fl_sockaddr>::open("sockaddr");
  if (!opened) return opened.error();
  BpfSkeleton<fl_sockaddr>& skel = *opened;
  if (int err = bpf_map__set_max_entries(skel->maps.fl_sa_rule_hits, std::max<uint32_t>(rule_slots, 1)); err != 0)
    return make_error(-err, "cannot size the rule counters");
  // Without the task helpers, the packet programs load without their process filter.
  skel->rodata->fl_skb_task_helpers = skb_task_helpers().available;
  // Host rules exist only in applied policies: no room for learned addresses
  // here (an LRU map is preallocated).
  if (int err = bpf_map__set_max_entries(skel->maps.fl_dns_learn, 64); err != 0)
    return make_error(-err, "cannot size the learned addresses map");
  FL_TRY(skel.load("the sockaddr BPF programs"));
  return SockaddrObject(std::move(skel));
}

Result<SockaddrObject> SockaddrObject::load_applied(int gen_fd, bool dns_learner) {
  auto opened = BpfSkeleton<fl_sockaddr>::open("sockaddr");
  if (!opened) return opened.error();
  BpfSkeleton<fl_sockaddr>& skel = *opened;
  skel->rodata->fl_skb_task_helpers = skb_task_helpers().available;
  skel->rodata->fl_sa_generations = 1;
  bpf_program__set_autoload(skel->progs.fl_dns_ingress, dns_learner);
  if (int err = bpf_map__reuse_fd(skel->maps.fl_sa_gen, gen_fd); err != 0)
    return make_error(-err, "cannot share the applied policy's generation map");
  FL_TRY(skel.load("the sockaddr BPF programs"));
  return SockaddrObject(std::move(skel));
}

Status SockaddrObject::attach_applied(int cgroup_fd) {
  std::vector<bpf_program*> progs = {skel_->progs.fl_connect4, skel_->progs.fl_connect6,   skel_->progs.fl_sendmsg4,
                                     skel_->progs.fl_sendmsg6, skel_->progs.fl_skb_egress, skel_->progs.fl_skb_ingress};
  if (bpf_program__fd(skel_->progs.fl_dns_ingress) >= 0) progs.push_back(skel_->progs.fl_dns_ingress);
  return attach_programs(cgroup_fd, progs);
}

const FeatureProbe& dns_learner_probe() {
  static const FeatureProbe p = [] {
    utsname u{};
    const std::string kernel = ::uname(&u) == 0 ? std::string(u.release) : std::string("this kernel");
    const int gen = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fl_sa_gen", 4, 4, 1, nullptr);
    if (gen < 0)
      return FeatureProbe{
          false, "cannot create a BPF map to probe the DNS learner on " + kernel + ": " + std::strerror(errno)};
    UniqueFd gen_fd(gen);
    auto obj = SockaddrObject::load_applied(gen_fd.get(), true);
    if (!obj)
      return FeatureProbe{false, "fl_dns_ingress does not load on kernel " + kernel + ": " + obj.error().describe()};
    return FeatureProbe{true, "fl_dns_ingress loads on kernel " + kernel};
  }();
  return p;
}

Status SockaddrObject::pin_applied(const std::string& dir) {
  FL_TRY(pin_links(dir));
  const std::pair<bpf_map*, const char*> maps[] = {
      {skel_->maps.fl_sa_gpolicy, "fl_sa_gpolicy"}, {skel_->maps.fl_sa_gdeny, "fl_sa_gdeny"},
      {skel_->maps.fl_sa_gallow, "fl_sa_gallow"},   {skel_->maps.fl_sa_ghits, "fl_sa_ghits"},
      {skel_->maps.fl_sa_stats, "fl_sa_stats"},     {skel_->maps.fl_flows, "fl_flows"},
      {skel_->maps.fl_dns_watch, "fl_dns_watch"},   {skel_->maps.fl_dns_learn, "fl_dns_learn"},
      {skel_->maps.fl_dns_stats, "fl_dns_stats"}};
  for (const auto& [m, name] : maps) {
    const std::string path = dir + "/" + name;
    if (int err = bpf_map__pin(m, path.c_str()); err != 0) {
      Error e = make_error(-err, "cannot pin " + path);
      for (const auto& [m2, name2] : maps) (void)bpf_map__unpin(m2, (dir + "/" + name2).c_str());
      unpin_links();
      return e;
    }
  }
  pin_dir_.clear();  // the pins stay after this object
  return {};
}

SockaddrObject::~SockaddrObject() {
  // An orderly end takes the pins with it; only a killed process leaves them.
  if (!links_.empty()) unpin_links();
  links_.clear();
}

Status SockaddrObject::attach(int cgroup_fd, bool redirect) {
  std::vector<bpf_program*> progs = {
      skel_->progs.fl_connect4,    skel_->progs.fl_connect6,   skel_->progs.fl_sendmsg4,
      skel_->progs.fl_sendmsg6,    skel_->progs.fl_bind4,      skel_->progs.fl_bind6,
      skel_->progs.fl_sock_create, skel_->progs.fl_skb_egress, skel_->progs.fl_skb_ingress};
  if (redirect) {
    progs.insert(progs.end(), {skel_->progs.fl_getpeername4, skel_->progs.fl_getpeername6, skel_->progs.fl_recvmsg4,
                               skel_->progs.fl_recvmsg6, skel_->progs.fl_sockops});
  }
  return attach_programs(cgroup_fd, progs);
}

Status SockaddrObject::attach_tcp_redirect(int cgroup_fd) {
  return attach_programs(cgroup_fd, {skel_->progs.fl_connect4, skel_->progs.fl_connect6, skel_->progs.fl_getpeername4,
                                     skel_->progs.fl_getpeername6, skel_->progs.fl_sockops});
}

Status SockaddrObject::attach_programs(int cgroup_fd, const std::vector<bpf_program*>& progs) {
  for (bpf_program* p : progs) {
    bpf_link* l = bpf_program__attach_cgroup(p, cgroup_fd);
    if (l == nullptr) {
      int err = errno;
      detach();
      return make_error(err, std::string("cannot attach ") + bpf_program__name(p) + " to the cgroup");
    }
    links_.emplace_back(l);
    link_names_.emplace_back(bpf_program__name(p));
  }
  return {};
}

Status SockaddrObject::pin_links(const std::string& dir) {
  struct statfs fs {};
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_error("cannot create " + dir);
  if (::statfs(dir.c_str(), &fs) != 0 || fs.f_type != BPF_FS_MAGIC)
    return make_error(ENOTSUP, dir + " is not on a bpf filesystem");
  pin_dir_ = dir;
  for (size_t i = 0; i < links_.size(); ++i) {
    std::string path = dir + "/" + link_names_[i];
    if (int err = bpf_link__pin(links_[i].get(), path.c_str()); err != 0) {
      Error e = make_error(-err, "cannot pin " + path);
      unpin_links();
      return e;
    }
  }
  if (std::find(link_names_.begin(), link_names_.end(), "fl_sockops") != link_names_.end()) {
    const std::string path = dir + "/" + kRedirectedConnsPin;
    if (int err = bpf_map__pin(skel_->maps.fl_sa_conns, path.c_str()); err != 0) {
      Error e = make_error(-err, "cannot pin " + path);
      unpin_links();
      return e;
    }
    conns_pinned_ = true;
  }
  return {};
}

void SockaddrObject::unpin_links() {
  if (pin_dir_.empty()) return;
  for (const auto& l : links_) (void)bpf_link__unpin(l.get());
  if (conns_pinned_) (void)bpf_map__unpin(skel_->maps.fl_sa_conns, nullptr);
  conns_pinned_ = false;
  ::rmdir(pin_dir_.c_str());
  pin_dir_.clear();
}

int SockaddrObject::policy_fd() const { return bpf_map__fd(skel_->maps.fl_sa_policy); }
int SockaddrObject::deny_fd() const { return bpf_map__fd(skel_->maps.fl_sa_deny); }
int SockaddrObject::allow_fd() const { return bpf_map__fd(skel_->maps.fl_sa_allow); }
int SockaddrObject::events_fd() const { return bpf_map__fd(skel_->maps.fl_sa_events); }
int SockaddrObject::stats_fd() const { return bpf_map__fd(skel_->maps.fl_sa_stats); }
int SockaddrObject::rng_fd() const { return bpf_map__fd(skel_->maps.fl_sa_rng); }
int SockaddrObject::flows_fd() const { return bpf_map__fd(skel_->maps.fl_flows); }
int SockaddrObject::redirect_fd() const { return bpf_map__fd(skel_->maps.fl_sa_redirect); }
int SockaddrObject::redirected_conns_fd() const { return bpf_map__fd(skel_->maps.fl_sa_conns); }
int SockaddrObject::gpolicy_fd() const { return bpf_map__fd(skel_->maps.fl_sa_gpolicy); }
int SockaddrObject::gdeny_fd() const { return bpf_map__fd(skel_->maps.fl_sa_gdeny); }
int SockaddrObject::gallow_fd() const { return bpf_map__fd(skel_->maps.fl_sa_gallow); }
int SockaddrObject::ghits_fd() const { return bpf_map__fd(skel_->maps.fl_sa_ghits); }

Result<std::vector<uint64_t>> SockaddrObject::rule_hits() const {
  const int fd = bpf_map__fd(skel_->maps.fl_sa_rule_hits);
  const uint32_t n = bpf_map__max_entries(skel_->maps.fl_sa_rule_hits);
  std::vector<uint64_t> out(n);
  for (uint32_t id = 0; id < n; ++id) {
    auto hits = sum_percpu<uint64_t>(fd, id);
    if (!hits) return make_error(hits.error().err, "cannot read the rule counters");
    out[id] = *hits;
  }
  return out;
}

int SockaddrObject::dns_watch_fd() const { return bpf_map__fd(skel_->maps.fl_dns_watch); }
int SockaddrObject::dns_learn_fd() const { return bpf_map__fd(skel_->maps.fl_dns_learn); }
int SockaddrObject::dns_stats_fd() const { return bpf_map__fd(skel_->maps.fl_dns_stats); }
int SockaddrObject::dns_ingress_fd() const { return bpf_program__fd(skel_->progs.fl_dns_ingress); }
int SockaddrObject::gen_fd() const { return bpf_map__fd(skel_->maps.fl_sa_gen); }

}  // namespace faultline
