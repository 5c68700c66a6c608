// The registry: the proxies and their toxics on the control path (one mutex), and
// what each worker is told when they change.
#include "userspace/proxy/proxy_registry.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <mutex>

#include "userspace/proxy/endpoint.h"
#include "userspace/proxy/io_uring_probe.h"
#include "userspace/proxy/relay_worker.h"

namespace faultline {

struct ProxyEntry {
  ProxyConfig config;
  uint64_t id = 0;  // the workers' key; new on every (re)start
  std::string listen_bound;
  std::vector<ToxicEntry> toxics;
  bool http = false;
  HttpLimits http_limits;
  HttpTls http_tls;
  std::vector<HttpFaultEntry> http_faults;
  std::shared_ptr<ProxyCounters> counters = std::make_shared<ProxyCounters>();
  std::vector<UniqueFd> listeners;  // our duplicates of the workers' sockets, for a handover
  bool released = false;            // handed over: no longer accepting
};

namespace {
long port_of_text(const std::string& host_port) {
  return std::strtol(host_port.c_str() + host_port.rfind(':') + 1, nullptr, 10);
}

uint64_t monotonic_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ULL + uint64_t(ts.tv_nsec);
}

std::string host_of_text(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  return colon == std::string::npos ? host_port : host_port.substr(0, colon);
}
}  // namespace

class ProxyRegistry::Impl {
 public:
  Impl(ProxyIoPaths paths, std::vector<std::unique_ptr<RelayWorker>> workers)
      : paths_(paths), workers_(std::move(workers)) {}

  ~Impl() {
    // Workers close their proxies and connections as they stop.
    workers_.clear();
  }

  ProxyIoPaths paths_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<RelayWorker>> workers_;
  std::map<std::string, ProxyEntry> proxies_;
  uint64_t next_id_ = 1;
  uint64_t next_uid_ = 1;

  Result<ProxyEntry*> find(const std::string& name) {
    auto it = proxies_.find(name);
    if (it == proxies_.end()) return make_error(ENOENT, "proxy not found");
    return &it->second;
  }

  static ProxyInfo info(const ProxyEntry& e) {
    ProxyInfo i{e.config, e.listen_bound, {}};
    for (const auto& t : e.toxics) i.toxics.push_back(t.toxic);
    i.http = e.http;
    i.http_limits = e.http_limits;
    i.http_tls = e.http_tls;
    for (const auto& f : e.http_faults) i.http_faults.push_back(f.fault);
    return i;
  }

  std::shared_ptr<const ToxicSet> toxic_set(const ProxyEntry& e) {
    auto set = std::make_shared<ToxicSet>();
    set->toxics = e.toxics;
    if (e.http) {
      auto rules = std::make_shared<HttpRules>();
      rules->faults = e.http_faults;
      rules->limits = e.http_limits;
      rules->tls = e.http_tls;
      rules->upstream_host = host_of_text(e.config.upstream);
      set->http = std::move(rules);
    }
    return set;
  }

  // Binds the listeners (so an address in use fails here, with nothing changed)
  // and hands one to each worker.
  Status start(ProxyEntry& e, std::vector<UniqueFd> adopted = {}) {
    ProxyRoute route{{}, e.config.original_destination, e.config.upstream_mark};
    if (e.config.forward) {
      route.judge = e.config.forward->judge;
      route.proxy_authorization = e.config.forward->proxy_authorization;
      route.authenticate = e.config.forward->authenticate;
      route.own_answer = e.config.forward->own_answer;
      route.name = e.config.name;
    } else if (!route.original_destination) {
      // Never resolved here: a name is resolved per connection (the proxy may
      // come before its upstream, as in Toxiproxy), and text that is no
      // address at all fails each connection, with the reason counted.
      auto hp = split_endpoint(e.config.upstream, "upstream");
      if (!hp) {
        route.upstream_unusable = hp.error().message;
      } else if (auto numeric = numeric_socket_address(hp->host, hp->port)) {
        route.upstream = *numeric;
      } else {
        route.upstream_host = hp->host;
        route.upstream_port = hp->port;
      }
    }
    Result<std::vector<UniqueFd>> fds = std::move(adopted);
    if (fds->empty()) {
      auto listen = resolve_endpoint(e.config.listen, "listen");
      if (!listen) return listen.error();
      fds = reuseport_listeners(*listen, unsigned(workers_.size()));
      if (!fds) return fds.error();
    } else if (fds->size() != workers_.size()) {
      return make_error(EINVAL, "proxy " + e.config.name + ": " + std::to_string(fds->size()) +
                                    " inherited listeners for " + std::to_string(workers_.size()) + " workers");
    }
    e.listeners.clear();
    for (const auto& fd : *fds) {
      UniqueFd d(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
      if (!d) return errno_error("proxy " + e.config.name + ": dup of a listener");
      e.listeners.push_back(std::move(d));
    }
    auto bound = local_address((*fds)[0].get());
    if (!bound) return bound.error();
    e.id = next_id_++;
    e.listen_bound = endpoint_text(*bound);
    // As Toxiproxy: the listen address becomes the one bound, so a proxy asked for
    // port 0 keeps its port when it is disabled and enabled again.
    if (port_of_text(e.config.listen) == 0) e.config.listen = e.listen_bound;
    auto set = toxic_set(e);
    for (size_t i = 0; i < workers_.size(); ++i)
      workers_[i]->start_proxy(e.id, std::move((*fds)[i]), route, set, e.counters);
    return {};
  }

  void stop(ProxyEntry& e) {
    if (e.id == 0) return;
    for (auto& w : workers_) w->stop_proxy(e.id);
    e.listeners.clear();
    e.id = 0;
    e.listen_bound.clear();
  }

  void publish_toxics(const ProxyEntry& e) {
    if (e.id == 0) return;
    auto set = toxic_set(e);
    RelayWorker::set_toxics(workers_, e.id, set);
  }

  // One of a proxy's named lists, its toxics (&ProxyEntry::toxics,
  // &ToxicEntry::toxic) or its HTTP faults (&ProxyEntry::http_faults,
  // &HttpFaultEntry::fault): the item called `name`, removed, or all cleared.
  // The callers hold mu_; a change is published to the workers.
  template <auto kList, auto kItem>
  auto get_named(const std::string& proxy, const std::string& name, const char* not_found)
      -> Result<std::remove_cvref_t<decltype((std::declval<ProxyEntry&>().*kList).front().*kItem)>> {
    auto found = find(proxy);
    if (!found) return found.error();
    for (const auto& entry : (*found)->*kList)
      if ((entry.*kItem).name == name) return entry.*kItem;
    return make_error(ENOENT, not_found);
  }
  template <auto kList, auto kItem>
  Status remove_named(const std::string& proxy, const std::string& name, const char* not_found) {
    auto found = find(proxy);
    if (!found) return found.error();
    auto& list = (*found)->*kList;
    auto it = std::find_if(list.begin(), list.end(), [&](const auto& entry) { return (entry.*kItem).name == name; });
    if (it == list.end()) return make_error(ENOENT, not_found);
    list.erase(it);
    publish_toxics(**found);
    return {};
  }
  template <auto kList>
  Status clear_list(const std::string& proxy) {
    auto found = find(proxy);
    if (!found) return found.error();
    ((*found)->*kList).clear();
    publish_toxics(**found);
    return {};
  }

  static Status check_config(const ProxyConfig& c) {
    if (c.name.empty()) return input_error(EINVAL, "proxy: \"name\": missing or empty");
    if (c.listen.empty()) return input_error(EINVAL, "proxy: \"listen\": missing or empty");
    if (c.forward) {
      if (!c.forward->judge) return input_error(EINVAL, "proxy: forward mode needs a request judge");
      return {};
    }
    if (c.upstream.empty() && !c.original_destination)
      return input_error(EINVAL, "proxy: \"upstream\": missing or empty");
    return {};
  }
};

Result<std::unique_ptr<ProxyRegistry>> ProxyRegistry::start(const ProxyOptions& options) {
  auto support = probe_io_uring();
  if (!support) return support.error();
  WorkerConfig wc;
  switch (options.accept) {
    case AcceptMode::automatic:
      wc.multishot_accept = support->multishot_accept;
      break;
    case AcceptMode::multishot:
      if (!support->multishot_accept)
        return input_error(EOPNOTSUPP, "proxy: accept mode multishot: this kernel's io_uring has no multishot accept");
      wc.multishot_accept = true;
      break;
    case AcceptMode::single:
      wc.multishot_accept = false;
      break;
  }
  switch (options.receive) {
    case ReceiveMode::automatic:
      wc.buffer_ring = support->buffer_ring;
      break;
    case ReceiveMode::buffer_ring:
      if (!support->buffer_ring)
        return input_error(EOPNOTSUPP,
                           "proxy: receive mode buffer_ring: this kernel's io_uring has no provided buffer rings");
      wc.buffer_ring = true;
      break;
    case ReceiveMode::plain:
      wc.buffer_ring = false;
      break;
  }
  if (options.buffer_size < 512) return input_error(EINVAL, "proxy: buffer_size below 512 bytes");
  wc.buffer_size = options.buffer_size;
  wc.ring_buffers = options.ring_buffers;
  wc.ring_entries = options.ring_entries;
  unsigned n = options.workers;
  if (n == 0) {
    long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    n = cpus > 0 ? unsigned(cpus) : 1;
  }
  std::vector<std::unique_ptr<RelayWorker>> workers;
  for (unsigned i = 0; i < n; ++i) {
    auto w = RelayWorker::start(wc);
    if (!w) return w.error();
    workers.push_back(std::move(*w));
  }
  ProxyIoPaths paths{wc.buffer_ring, wc.multishot_accept, n};
  return std::unique_ptr<ProxyRegistry>(new ProxyRegistry(std::make_unique<Impl>(paths, std::move(workers))));
}

ProxyRegistry::ProxyRegistry(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProxyRegistry::~ProxyRegistry() = default;

ProxyIoPaths ProxyRegistry::io_paths() const { return impl_->paths_; }

Result<ProxyInfo> ProxyRegistry::create(const ProxyConfig& config) {
  FL_TRY(Impl::check_config(config));
  std::lock_guard lock(impl_->mu_);
  if (impl_->proxies_.count(config.name) != 0) return make_error(EEXIST, "proxy already exists");
  ProxyEntry e;
  e.config = config;
  if (config.tls) {
    if (config.tls->mode != HttpTlsMode::own || (!config.tls->server && !config.tls->client))
      return input_error(EINVAL, "proxy: \"tls\": a proxy's own TLS needs a listening or an upstream context");
    e.http = true;
    e.http_tls = *config.tls;
  }
  if (config.enabled) FL_TRY(impl_->start(e));
  auto& stored = impl_->proxies_[config.name] = std::move(e);
  return Impl::info(stored);
}

Result<ProxyInfo> ProxyRegistry::get(const std::string& name) const {
  std::lock_guard lock(impl_->mu_);
  auto e = impl_->find(name);
  if (!e) return e.error();
  return Impl::info(**e);
}

std::vector<ProxyInfo> ProxyRegistry::list() const {
  std::lock_guard lock(impl_->mu_);
  std::vector<ProxyInfo> out;
  for (const auto& [name, e] : impl_->proxies_) out.push_back(Impl::info(e));
  return out;
}

Result<ProxyInfo> ProxyRegistry::update(const std::string& name, const ProxyUpdate& change) {
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(name);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  ProxyConfig next = e.config;
  if (change.listen) next.listen = *change.listen;
  if (change.upstream) next.upstream = *change.upstream;
  if (change.enabled) next.enabled = *change.enabled;
  FL_TRY(Impl::check_config(next));
  bool restart = next.listen != e.config.listen || next.upstream != e.config.upstream;
  if (e.id != 0 && (restart || !next.enabled)) impl_->stop(e);
  if (next.enabled && e.id == 0) {
    // Judge the new addresses before giving up the old ones for good: on failure
    // the proxy runs again as it was.
    ProxyConfig previous = e.config;
    e.config = next;
    if (auto s = impl_->start(e); !s) {
      e.config = previous;
      if (previous.enabled) (void)impl_->start(e);
      return s.error();
    }
    return Impl::info(e);
  }
  e.config = next;
  return Impl::info(e);
}

Status ProxyRegistry::remove(const std::string& name) {
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(name);
  if (!found) return found.error();
  impl_->stop(**found);
  impl_->proxies_.erase(name);
  return {};
}

void ProxyRegistry::remove_all() {
  std::lock_guard lock(impl_->mu_);
  for (auto& [name, e] : impl_->proxies_) impl_->stop(e);
  impl_->proxies_.clear();
}

Status ProxyRegistry::reset() {
  std::lock_guard lock(impl_->mu_);
  Status first;
  for (auto& [name, e] : impl_->proxies_) {
    e.toxics.clear();
    e.http_faults.clear();
    impl_->publish_toxics(e);
    if (!e.config.enabled) {
      e.config.enabled = true;
      if (auto s = impl_->start(e); !s) {
        e.config.enabled = false;
        if (first.ok()) first = s;
      }
    }
  }
  return first;
}

Result<Toxic> ProxyRegistry::add_toxic(const std::string& proxy, const Toxic& toxic) {
  FL_TRY(validate_toxic(toxic));
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(proxy);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  for (const auto& t : e.toxics)
    if (t.toxic.name == toxic.name) return make_error(EEXIST, "toxic already exists");
  uint64_t uid = impl_->next_uid_++;
  // first_n counts the connections accepted from now on (the workers stamp
  // each accept with the same clock).
  e.toxics.push_back(ToxicEntry{toxic, uid, uid, std::make_shared<std::atomic<uint64_t>>(0), monotonic_now_ns()});
  impl_->publish_toxics(e);
  return toxic;
}

Result<Toxic> ProxyRegistry::update_toxic(const std::string& proxy, const std::string& toxic,
                                          const Toxic& replacement) {
  FL_TRY(validate_toxic(replacement));
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(proxy);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  auto it = std::find_if(e.toxics.begin(), e.toxics.end(), [&](const ToxicEntry& t) { return t.toxic.name == toxic; });
  if (it == e.toxics.end()) return make_error(ENOENT, "toxic not found");
  if (replacement.name != toxic)
    for (const auto& t : e.toxics)
      if (t.toxic.name == replacement.name) return make_error(EEXIST, "toxic already exists");
  it->toxic = replacement;
  it->version = impl_->next_uid_++;
  impl_->publish_toxics(e);
  return replacement;
}

Status ProxyRegistry::remove_toxic(const std::string& proxy, const std::string& toxic) {
  std::lock_guard lock(impl_->mu_);
  return impl_->remove_named<&ProxyEntry::toxics, &ToxicEntry::toxic>(proxy, toxic, "toxic not found");
}

Result<Toxic> ProxyRegistry::get_toxic(const std::string& proxy, const std::string& toxic) const {
  std::lock_guard lock(impl_->mu_);
  return impl_->get_named<&ProxyEntry::toxics, &ToxicEntry::toxic>(proxy, toxic, "toxic not found");
}

Status ProxyRegistry::clear_toxics(const std::string& proxy) {
  std::lock_guard lock(impl_->mu_);
  return impl_->clear_list<&ProxyEntry::toxics>(proxy);
}

Result<ProxyStats> ProxyRegistry::stats(const std::string& name) const {
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(name);
  if (!found) return found.error();
  const ProxyEntry& e = **found;
  ProxyStats s;
  s.connections_accepted = e.counters->accepted.load(std::memory_order_relaxed);
  s.connections_active = e.counters->active.load(std::memory_order_relaxed);
  s.bytes_upstream = e.counters->bytes_upstream.load(std::memory_order_relaxed);
  s.bytes_downstream = e.counters->bytes_downstream.load(std::memory_order_relaxed);
  s.receives_without_buffer = e.counters->ring_empty.load(std::memory_order_relaxed);
  s.connections_unrouted = e.counters->unrouted.load(std::memory_order_relaxed);
  s.upstream_unresolved = e.counters->upstream_unresolved.load(std::memory_order_relaxed);
  s.upstream_unreachable = e.counters->upstream_unreachable.load(std::memory_order_relaxed);
  {
    std::lock_guard why(e.counters->why_mu);
    s.last_upstream_failure = e.counters->last_upstream_failure;
  }
  for (const auto& t : e.toxics) s.toxics.push_back({t.toxic.name, t.activations->load(std::memory_order_relaxed)});
  for (const auto& f : e.http_faults) s.http_faults.push_back({f.fault.name, f.hits->load(std::memory_order_relaxed)});
  return s;
}

Result<std::vector<ProxyRegistry::Handover>> ProxyRegistry::listeners() const {
  std::lock_guard lock(impl_->mu_);
  std::vector<Handover> out;
  for (const auto& [name, e] : impl_->proxies_) {
    Handover h{Impl::info(e), {}};
    if (!e.released) {
      for (const auto& fd : e.listeners) {
        UniqueFd d(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
        if (!d) return errno_error("proxy " + name + ": dup of a listener");
        h.listeners.push_back(std::move(d));
      }
    }
    out.push_back(std::move(h));
  }
  return out;
}

Result<ProxyInfo> ProxyRegistry::adopt(const ProxyInfo& info, std::vector<UniqueFd> listeners) {
  const ProxyConfig& config = info.config;
  std::lock_guard lock(impl_->mu_);
  FL_TRY(Impl::check_config(config));
  if (impl_->proxies_.contains(config.name)) return make_error(EEXIST, "proxy already exists");
  ProxyEntry e;
  e.config = config;
  for (const auto& t : info.toxics) {
    FL_TRY(validate_toxic(t));
    const uint64_t uid = impl_->next_uid_++;
    e.toxics.push_back(ToxicEntry{t, uid, uid, std::make_shared<std::atomic<uint64_t>>(0), monotonic_now_ns()});
  }
  for (const auto& f : info.http_faults) {
    FL_TRY(validate_http_fault(f));
    e.http_faults.push_back(HttpFaultEntry{f, std::make_shared<std::atomic<uint64_t>>(0)});
  }
  e.http = info.http;
  e.http_limits = info.http_limits;
  e.http_tls = info.http_tls;
  // The set the workers start with carries the HTTP faults: no connection
  // accepted on the inherited sockets misses them.
  if (config.enabled) FL_TRY(impl_->start(e, std::move(listeners)));
  auto [it, inserted] = impl_->proxies_.emplace(config.name, std::move(e));
  return Impl::info(it->second);
}

void ProxyRegistry::release_listeners() {
  std::lock_guard lock(impl_->mu_);
  for (auto& [name, e] : impl_->proxies_) {
    if (e.id == 0 || e.released) continue;
    for (auto& w : impl_->workers_) w->release_listener(e.id);
    e.listeners.clear();
    e.released = true;
  }
}

uint64_t ProxyRegistry::open_connections() const {
  std::lock_guard lock(impl_->mu_);
  uint64_t n = 0;
  for (const auto& [name, e] : impl_->proxies_) n += e.counters->active.load(std::memory_order_relaxed);
  return n;
}

Result<HttpFault> ProxyRegistry::add_http_fault(const std::string& proxy, const HttpFault& fault) {
  FL_TRY(validate_http_fault(fault));
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(proxy);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  for (const auto& f : e.http_faults)
    if (f.fault.name == fault.name) return make_error(EEXIST, "http fault already exists");
  e.http = true;
  e.http_faults.push_back(HttpFaultEntry{fault, std::make_shared<std::atomic<uint64_t>>(0)});
  impl_->publish_toxics(e);
  return fault;
}

Result<HttpFault> ProxyRegistry::update_http_fault(const std::string& proxy, const std::string& fault,
                                                   const HttpFault& replacement) {
  FL_TRY(validate_http_fault(replacement));
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(proxy);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  auto it = std::find_if(e.http_faults.begin(), e.http_faults.end(),
                         [&](const HttpFaultEntry& f) { return f.fault.name == fault; });
  if (it == e.http_faults.end()) return make_error(ENOENT, "http fault not found");
  if (replacement.name != fault)
    for (const auto& f : e.http_faults)
      if (f.fault.name == replacement.name) return make_error(EEXIST, "http fault already exists");
  if (replacement.first_n != it->fault.first_n) it->matched = std::make_shared<std::atomic<int64_t>>(0);
  it->fault = replacement;
  impl_->publish_toxics(e);
  return replacement;
}

Status ProxyRegistry::remove_http_fault(const std::string& proxy, const std::string& fault) {
  std::lock_guard lock(impl_->mu_);
  return impl_->remove_named<&ProxyEntry::http_faults, &HttpFaultEntry::fault>(proxy, fault, "http fault not found");
}

Result<HttpFault> ProxyRegistry::get_http_fault(const std::string& proxy, const std::string& fault) const {
  std::lock_guard lock(impl_->mu_);
  return impl_->get_named<&ProxyEntry::http_faults, &HttpFaultEntry::fault>(proxy, fault, "http fault not found");
}

Status ProxyRegistry::clear_http_faults(const std::string& proxy) {
  std::lock_guard lock(impl_->mu_);
  return impl_->clear_list<&ProxyEntry::http_faults>(proxy);
}

Status ProxyRegistry::set_http_limits(const std::string& proxy, const HttpLimits& limits) {
  if (limits.max_header_bytes < 1024 || limits.max_headers == 0)
    return input_error(EINVAL, "http limits: max_header_bytes must be at least 1024 and max_headers at least 1");
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(proxy);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  e.http = true;
  e.http_limits = limits;
  impl_->publish_toxics(e);
  return {};
}

Status ProxyRegistry::set_http_tls(const std::string& proxy, const HttpTls& tls) {
  if (tls.mode == HttpTlsMode::terminate && (!tls.server || !tls.client))
    return input_error(EINVAL, "http tls: terminate needs both TLS contexts (set_up_termination)");
  if (tls.mode == HttpTlsMode::own && !tls.server && !tls.client)
    return input_error(EINVAL, "http tls: own TLS needs a listening or an upstream context");
  std::lock_guard lock(impl_->mu_);
  auto found = impl_->find(proxy);
  if (!found) return found.error();
  ProxyEntry& e = **found;
  e.http = true;
  e.http_tls = tls;
  // What the proxy shows and hands over follows its own TLS.
  if (tls.mode == HttpTlsMode::own)
    e.config.tls = tls;
  else
    e.config.tls.reset();
  impl_->publish_toxics(e);
  return {};
}

}  // namespace faultline
