// TcpRun: the stream family's side of the guarded run.
#include "userspace/faults/stream/run.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>

#include "base/clock.h"
#include "faultline/sockaddr_abi.h"
#include "loader/netns.h"
#include "userspace/proxy/tls_setup.h"

namespace faultline {
namespace {

std::string proxy_name(const std::string& id, bool v4) { return "tcp-" + id + (v4 ? "-v4" : "-v6"); }

// The original destination of a connection the proxy accepted, from the kernel's
// record of the redirect (taken, so the map holds only connections not yet seen).
std::optional<SocketAddress> original_of(int conns_fd, int accepted_fd) {
  sockaddr_storage peer{}, local{};
  socklen_t pl = sizeof peer, ll = sizeof local;
  if (::getpeername(accepted_fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
      ::getsockname(accepted_fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0)
    return std::nullopt;
  auto conn = take_redirected_conn(conns_fd, reinterpret_cast<sockaddr*>(&peer), reinterpret_cast<sockaddr*>(&local));
  if (!conn || !*conn) return std::nullopt;
  return socket_address((*conn)->orig.b, (*conn)->orig_port);
}

}  // namespace

TcpRun::~TcpRun() { (void)end("the run is over"); }

nlohmann::json TcpRun::plan() const {
  nlohmann::json dests = nlohmann::json::array();
  for (const auto& d : spec_.target.dests) dests.push_back(d.prefix.str());
  nlohmann::json j{{"kind", spec_.http() ? "http" : "tcp"},
                   {"target", spec_.target.text},
                   {"addresses", dests},
                   {spec_.http() ? "http_faults" : "toxics", spec_.toxics_json()},
                   {"scope", spec_.scope_text()},
                   {"duration_ms", spec_.duration_ns / 1'000'000},
                   {"drain_ms", spec_.drain_ns / 1'000'000},
                   {"mechanism", "proxy"},
                   {"why",
                    "TCP connects of the scope to the target are redirected in the kernel (cgroup connect4/6) "
                    "to a proxy in this process, which applies the toxics"}};
  if (!spec_.command.empty()) j["command"] = spec_.command;
  if (!spec_.cgroup.empty()) j["cgroup"] = spec_.cgroup;
  return j;
}

std::string TcpRun::dry_run_text() const {
  std::string out = "dry run: would apply " + spec_.describe() + "\n  addresses:";
  for (const auto& d : spec_.target.dests) out += " " + d.prefix.str();
  return out + "\n  mechanism: TCP connects redirected in the kernel (cgroup connect4/6) to a proxy in this process\n";
}

uint32_t TcpRun::netns_inode() const {
  auto ns = resolve_netns("");
  return ns ? ns->inode : 0;
}

Result<FaultStart> TcpRun::apply() {
  // The scope's cgroup first: a --cgroup that is not one is bad input, before
  // anything is made.
  UniqueFd cgroup_fd;
  if (!spec_.command.empty()) {
    auto cg = ScopedCgroup::create("faultline-tcp-" + std::to_string(::getpid()));
    if (!cg) return cg.error();
    fresh_.emplace(std::move(*cg));
    cgroup_fd.reset(::dup(fresh_->fd()));
  } else {
    auto cg = open_cgroup_v2(spec_.cgroup.empty() ? "/" : spec_.cgroup, "--cgroup");
    if (!cg) return as_bad_input(cg.error());
    cgroup_fd = std::move(cg->fd);
  }

  Session s;
  s.kind = "tcp";
  s.mechanism = "proxy";
  s.summary = spec_.describe();
  auto reg = register_session(std::move(s), warn_);
  if (reg) session_.emplace(std::move(*reg));
  const std::string id = session_ ? session_->id() : "t" + std::to_string(::getpid());

  auto obj = SockaddrObject::load();
  if (!obj) return obj.error();
  obj_.emplace(std::move(*obj));

  // TLS: termination's CA, contexts and the command's trust files come first,
  // so a CA that cannot be made stops the run before any redirect.
  auto tls = set_up_run_tls(spec_.terminate_tls, spec_.upstream_ca, "faultline-tls");
  if (!tls) return tls.error();
  if (tls->trust_dir) trust_dir_.emplace(std::move(*tls->trust_dir));
  if (const auto& t = tls->termination) {
    child_env_ = std::make_unique<ChildEnvironment>(t->env);
    if (t->ca_created) warn_ << "faultctl run http: created the local CA " << t->ca.subject << "\n";
  }

  ProxyOptions po;
  po.workers = 1;
  auto proxies = ProxyRegistry::start(po);
  if (!proxies) return proxies.error();
  proxies_ = std::move(*proxies);

  // One proxy per family the target has: a v4 connect can only be sent to a v4
  // address, a v6 one to a v6 address.
  bool has_v4 = false, has_v6 = false;
  for (const auto& d : spec_.target.dests) (d.prefix.v4 ? has_v4 : has_v6) = true;
  std::vector<RedirectRule> rules;
  const int conns_fd = obj_->redirected_conns_fd();
  for (bool v4 : {true, false}) {
    if (v4 ? !has_v4 : !has_v6) continue;
    ProxyConfig pc;
    pc.name = proxy_name(id, v4);
    pc.listen = v4 ? "127.0.0.1:0" : "[::1]:0";
    pc.upstream = "transparent";
    pc.original_destination = [conns_fd](int fd) { return original_of(conns_fd, fd); };
    pc.upstream_mark = FL_PROXY_MARK;
    auto info = proxies_->create(pc);
    if (!info) return info.error();
    for (const auto& t : spec_.toxics) {
      auto added = proxies_->add_toxic(pc.name, t);
      if (!added) return added.error();
    }
    for (const auto& f : spec_.http_faults) {
      auto added = proxies_->add_http_fault(pc.name, f);
      if (!added) return added.error();
    }
    if (spec_.http()) FL_TRY(proxies_->set_http_tls(pc.name, tls->http));
    proxy_names_.push_back(pc.name);
    listen_.push_back(info->listen_bound);
    auto bound = parse_address_port(info->listen_bound);
    if (!bound) return bound.error();
    for (const auto& d : spec_.target.dests) {
      if (d.prefix.v4 != v4) continue;
      RedirectRule r;
      r.dest = d;
      r.target = bound->first;
      r.target_port = bound->second;
      r.text = spec_.target.text;
      rules.push_back(r);
    }
  }
  FL_TRY(load_redirects(rules, obj_->redirect_fd()));

  fl_sa_policy pol{};
  pol.armed = 1;
  const uint64_t expires = boottime_ns() + spec_.duration_ns;
  pol.expires_ns = expires;  // the in-kernel deadman: the redirect stops then, whatever happens here
  pol.flags = FL_SA_REDIRECT;
  pol.exempt_mark = FL_PROXY_MARK;
  uint32_t zero = 0;
  if (bpf_map_update_elem(obj_->policy_fd(), &zero, &pol, BPF_ANY) != 0)
    return errno_error("cannot arm the redirect's policy");
  FL_TRY(obj_->attach_tcp_redirect(cgroup_fd.get()));

  if (fresh_) {
    std::function<bool()> prepare;
    if (child_env_)
      prepare = [env = child_env_.get()] {
        env->apply();
        return true;
      };
    auto child = HeldChild::spawn(spec_.command, prepare, "faultctl run tcp");
    if (!child) return child.error();
    FL_TRY(fresh_->join(child->pid()));
    FL_TRY(child->release());
    child_.emplace(std::move(*child));
  }
  if (session_) {
    session_->session().policy_map_id = map_id_of(obj_->policy_fd());
    session_->session().stats_map_id = map_id_of(obj_->stats_fd());
    session_->session().expires_ns = expires;
    (void)session_->save();
  }

  FaultStart f;
  f.id = id;
  f.expires_ns = expires;
  f.until_command_exits = child_.has_value();
  nlohmann::json dests = nlohmann::json::array();
  for (const auto& d : spec_.target.dests) dests.push_back(d.prefix.str());
  f.event = {{"mechanism", "proxy"},
             {"scope", spec_.scope_text()},
             {"addresses", dests},
             {"proxy", listen_},
             {spec_.http() ? "http_faults" : "toxics", spec_.toxics_json()}};
  std::string via;
  for (const auto& l : listen_) via += (via.empty() ? "" : ", ") + l;
  f.text = std::string(spec_.http() ? "http" : "tcp") + " fault " + id + ": " + spec_.describe() +
           " (redirected to the proxy on " + via + ")";
  return f;
}

TcpRun::Counts TcpRun::counts() const {
  if (ended_) return at_end_;
  Counts c;
  if (obj_) {
    if (auto st = sum_sa_stats(obj_->stats_fd())) c.redirected = st->redirected;
  }
  if (!proxies_) return c;
  for (const auto& name : proxy_names_) {
    auto st = proxies_->stats(name);
    if (!st) continue;
    c.accepted += st->connections_accepted;
    c.active += st->connections_active;
    c.unrouted += st->connections_unrouted;
    c.bytes_up += st->bytes_upstream;
    c.bytes_down += st->bytes_downstream;
    for (const auto& t : st->http_faults) {  // requests each HTTP fault took
      auto it = std::find_if(c.toxics.begin(), c.toxics.end(), [&](const auto& x) { return x.toxic == t.toxic; });
      if (it == c.toxics.end())
        c.toxics.push_back(t);
      else
        it->connections += t.connections;
    }
    for (const auto& t : st->toxics) {
      auto it = std::find_if(c.toxics.begin(), c.toxics.end(), [&](const auto& x) { return x.toxic == t.toxic; });
      if (it == c.toxics.end())
        c.toxics.push_back(t);
      else
        it->connections += t.connections;
    }
  }
  return c;
}

std::optional<FaultEnding> TcpRun::check() {
  if (child_) {
    if (auto code = child_->poll_exit())
      return FaultEnding{RunOutcome::Completed, "command exited " + std::to_string(*code), *code};
  }
  if (session_ && !ended_) {
    Counts c = counts();
    session_->set_counters({{"connections", c.accepted}, {"open", c.active}});
    if (session_->abort_requested())
      return FaultEnding{RunOutcome::AbortedFromOutside, "ended from outside (faultctl abort)", std::nullopt};
  }
  return std::nullopt;
}

FaultObservation TcpRun::observe() {
  Counts c = counts();
  FaultObservation o;
  nlohmann::json toxics = nlohmann::json::object();
  for (const auto& t : c.toxics) toxics[t.toxic] = t.connections;
  o.fields = {{"redirected", c.redirected},
              {"connections", c.accepted},
              {"open", c.active},
              {"bytes_upstream", c.bytes_up},
              {"bytes_downstream", c.bytes_down},
              {spec_.http() ? "fault_requests" : "toxic_connections", toxics}};
  if (c.unrouted) o.fields["unrouted"] = c.unrouted;
  o.text = std::to_string(c.accepted) + " connections through the proxy (" + std::to_string(c.active) + " open), " +
           std::to_string(c.bytes_up) + " B up, " + std::to_string(c.bytes_down) + " B down";
  for (const auto& t : c.toxics)
    o.text += " | " + t.toxic + " on " + std::to_string(t.connections) + (spec_.http() ? " requests" : "");
  if (c.unrouted) o.text += " | " + std::to_string(c.unrouted) + " closed: no original destination";
  return o;
}

Status TcpRun::end(std::string_view) {
  if (ended_) return {};
  // The redirect first (new connects go straight to the target), then the
  // toxics: what is open is released at once and goes on clean.
  if (obj_) obj_->detach();
  Counts c = counts();
  ended_ = true;
  at_end_ = c;
  if (proxies_) {
    for (const auto& name : proxy_names_) {
      (void)proxies_->clear_toxics(name);
      (void)proxies_->clear_http_faults(name);
    }
  }
  if (session_) session_->end();
  return {};
}

void TcpRun::describe_end(bool ended, FaultObservation& obs) const {
  if (!ended) return;
  obs.fields["released_open"] = at_end_.active;
  if (at_end_.active)
    obs.text += " | " + std::to_string(at_end_.active) + " open connections released (no toxic; clean from now)";
}

std::optional<std::string> TcpRun::touched_nothing() const {
  if (at_end_.accepted != 0) return std::nullopt;
  return "no TCP connection of " + spec_.scope_text() + " to " + spec_.target.text + " was made during the fault";
}

bool TcpRun::forward_signal(int sig) {
  if (!child_ || child_->poll_exit()) return false;
  ::kill(child_->pid(), sig);
  return true;
}

size_t TcpRun::drain() {
  if (!proxies_) return 0;
  const uint64_t deadline = monotonic_ns() + spec_.drain_ns;
  for (;;) {
    uint64_t open = 0;
    for (const auto& name : proxy_names_) {
      if (auto st = proxies_->stats(name)) open += st->connections_active;
    }
    if (open == 0 || monotonic_ns() >= deadline) return open;
    sleep_ms(20);
  }
}

}  // namespace faultline
