// The guard's fault proxy: started before the guard, so the redirect never
// points at nothing; stopped after it, so the command's last requests finish.
#include "ctl/guard_fault_proxy.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <ostream>

#include "userspace/enforce/redirected_conns.h"
#include "userspace/proxy/tls_setup.h"

namespace faultline {
namespace {

// Where the client asked to go: the guard's sockops program filed it in the
// kernel when it redirected the connect (never a guess).
std::optional<SocketAddress> original_destination(int fd) {
  auto conn = find_redirected_conn(fd);
  if (!conn || !*conn) return std::nullopt;
  return socket_address((*conn)->orig.b, (*conn)->orig_port);
}

}  // namespace

GuardFaultProxy::~GuardFaultProxy() = default;

Result<std::unique_ptr<GuardFaultProxy>> GuardFaultProxy::start(const GuardFaults& faults, std::ostream& log) {
  std::unique_ptr<GuardFaultProxy> p(new GuardFaultProxy);
  auto tls = set_up_run_tls(faults.terminate_tls, faults.upstream_ca, "faultline-guard-tls");
  if (!tls) return tls.error();
  if (tls->trust_dir) p->trust_dir_.emplace(std::move(*tls->trust_dir));
  if (const auto& t = tls->termination) {
    p->env_ = t->env;
    log << "faultline guard: TLS to the faulted hosts is terminated with " << (t->ca_created ? "the new " : "")
        << "local CA " << t->ca.subject << "; the command trusts it through";
    for (const auto& [k, v] : p->env_) log << " " << k;
    log << "\n";
  }
  ProxyOptions po;
  po.workers = 1;
  auto reg = ProxyRegistry::start(po);
  if (!reg) return reg.error();
  p->proxies_ = std::move(*reg);

  bool has_v4 = false, has_v6 = false;
  for (const auto& f : faults.faults)
    for (const auto& d : f.target.dests) (d.prefix.v4 ? has_v4 : has_v6) = true;
  for (bool v4 : {true, false}) {
    if (v4 ? !has_v4 : !has_v6) continue;
    ProxyConfig pc;
    pc.name = v4 ? "guard-faults-v4" : "guard-faults-v6";
    pc.listen = v4 ? "127.0.0.1:0" : "[::1]:0";
    pc.upstream = "transparent";
    pc.original_destination = original_destination;
    auto info = p->proxies_->create(pc);
    if (!info) return info.error();
    for (const auto& f : faults.faults) {
      auto added = p->proxies_->add_http_fault(pc.name, f.fault);
      if (!added) return added.error();
    }
    FL_TRY(p->proxies_->set_http_tls(pc.name, tls->http));
    p->names_.push_back(pc.name);
    auto bound = parse_address_port(info->listen_bound);
    if (!bound) return bound.error();
    // One redirect per address and port, however many faults share it.
    std::map<std::string, bool> seen;
    for (const auto& f : faults.faults) {
      for (const auto& d : f.target.dests) {
        if (d.prefix.v4 != v4) continue;
        const std::string key = d.prefix.str() + ":" + std::to_string(d.ports.lo);
        if (seen[key]) continue;
        seen[key] = true;
        RedirectRule r;
        r.dest = d;
        r.target = bound->first;
        r.target_port = bound->second;
        r.text = f.target.text + " (--fault-host)";
        p->redirects_.push_back(r);
      }
    }
  }
  return p;
}

void GuardFaultProxy::print_summary(std::ostream& log) const {
  std::map<std::string, uint64_t> hits;
  std::vector<std::string> order;
  uint64_t unrouted = 0;
  for (const auto& name : names_) {
    auto st = proxies_->stats(name);
    if (!st) continue;
    unrouted += st->connections_unrouted;
    for (const auto& f : st->http_faults) {
      if (!hits.contains(f.toxic)) order.push_back(f.toxic);
      hits[f.toxic] += f.connections;
    }
  }
  log << "  HTTP faults (requests, or TLS connections by SNI, each took):\n";
  for (const auto& n : order) log << "    " << n << "  " << hits[n] << "\n";
  if (unrouted != 0)
    log << "  connections the proxy could not place (no original destination filed; closed): " << unrouted << "\n";
}

}  // namespace faultline
