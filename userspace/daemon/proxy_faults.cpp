// The watcher reconciles what it bounds with what the registry holds every
// 100 ms, so whatever made a toxic (create, populate, an update that renames)
// it is bounded from when it was first seen; the kill file is read on the same
// beat. Requests that would start a fault pass a gate first.
#include "userspace/daemon/proxy_faults.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/units.h"
#include "userspace/daemon/http_faults_api.h"
#include "userspace/daemon/toxiproxy_api.h"
#include "userspace/proxy/http_toxic.h"
#include "userspace/state/kill_switch.h"

namespace faultline {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTick = std::chrono::milliseconds(100);

std::string toxic_key(const std::string& name) { return "toxic " + name; }
std::string http_key(const std::string& name) { return "http " + name; }
constexpr const char* kDown = "down";

// Whether the request would start a fault: a toxic added or changed, or a
// proxy made or set with "enabled": false.
bool starts_fault(const HttpRequest& req) {
  if (req.method != "POST" && req.method != "PATCH") return false;
  if (req.path.find("/toxics") != std::string::npos || req.path.find("/http_faults") != std::string::npos) return true;
  if (req.path.rfind("/proxies", 0) != 0 && req.path != "/populate") return false;
  const nlohmann::json j = nlohmann::json::parse(req.body, nullptr, false);
  auto disables = [](const nlohmann::json& p) {
    return p.is_object() && p.contains("enabled") && p["enabled"] == false;
  };
  if (disables(j)) return true;
  if (j.is_array()) {
    for (const auto& p : j)
      if (disables(p)) return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<ProxyFaults>> ProxyFaults::start(const ProxyOptions& options, uint64_t toxic_max_ns, Log log) {
  auto reg = ProxyRegistry::start(options);
  if (!reg) return reg.error();
  std::unique_ptr<ProxyFaults> pf(new ProxyFaults(std::move(*reg), toxic_max_ns, std::move(log)));
  pf->watcher_ = std::thread([p = pf.get()] { p->watch(); });
  return pf;
}

ProxyFaults::ProxyFaults(std::unique_ptr<ProxyRegistry> registry, uint64_t toxic_max_ns, Log log)
    : registry_(std::move(registry)), toxic_max_ns_(toxic_max_ns), log_(std::move(log)) {
  router_ = toxiproxy_router(*registry_);
  add_http_fault_routes(router_, *registry_);
}

ProxyFaults::~ProxyFaults() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

HttpHandler ProxyFaults::toxiproxy_handler() {
  return refuse_browsers([this](const HttpRequest& req) {
    if (starts_fault(req)) {
      if (auto why = fault_start_refused()) return HttpReply::error(403, "no fault may start: " + *why);
    }
    return router_.route(req);
  });
}

size_t ProxyFaults::end_all(const std::string& why) {
  size_t n = 0;
  for (const ProxyInfo& p : registry_->list()) n += p.toxics.size() + p.http_faults.size() + (p.config.enabled ? 0 : 1);
  if (n == 0) return 0;
  if (auto st = registry_->reset(); !st) {
    log_("faultd: cannot end the proxies' faults (" + why + "): " + st.error().describe());
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_.clear();
  }
  log_("faultd: " + why + ": " + std::to_string(n) +
       " proxy faults ended (every toxic and HTTP fault removed, every proxy up)");
  return n;
}

void ProxyFaults::watch() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, kTick, [this] { return stopping_; })) return;
    }
    // The kill file: everything ends at once, and the gate refuses while it stays.
    const bool kill = kill_file_present();
    if (kill && !kill_file_seen_.exchange(true)) end_all("kill file " + kill_file_path());
    if (!kill) kill_file_seen_ = false;

    log_upstream_failures();

    // Reconcile, then end what outlived its bound.
    const auto now = Clock::now();
    std::vector<std::pair<std::string, std::string>> expired;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::set<std::pair<std::string, std::string>> live;
      for (const ProxyInfo& p : registry_->list()) {
        for (const Toxic& t : p.toxics) live.insert({p.config.name, toxic_key(t.name)});
        for (const HttpFault& f : p.http_faults) live.insert({p.config.name, http_key(f.name)});
        if (!p.config.enabled) live.insert({p.config.name, kDown});
      }
      for (auto it = started_.begin(); it != started_.end();)
        it = live.contains(it->first) ? std::next(it) : started_.erase(it);
      for (const auto& k : live) {
        auto [it, fresh] = started_.try_emplace(k, now);
        if (!fresh && now - it->second >= std::chrono::nanoseconds(toxic_max_ns_)) expired.push_back(k);
      }
    }
    for (const auto& [proxy, what] : expired) {
      Status st;
      if (what == kDown) {
        ProxyUpdate up;
        up.enabled = true;
        auto r = registry_->update(proxy, up);
        if (!r) st = r.error();
      } else if (what.rfind("http ", 0) == 0) {
        st = registry_->remove_http_fault(proxy, what.substr(5));
      } else {
        st = registry_->remove_toxic(proxy, what.substr(6));
      }
      if (st || st.error().err == ENOENT) {
        std::lock_guard<std::mutex> lock(mu_);
        started_.erase({proxy, what});
        log_("faultd: proxy " + proxy + ": " + what + " ended: it reached its bound of " +
             format_duration(toxic_max_ns_) + " (--toxic-max-duration)");
      } else {
        log_("faultd: proxy " + proxy + ": cannot end " + what + ": " + st.error().describe());
      }
    }
  }
}

// A connection whose upstream cannot be had is closed after accept, as in
// Toxiproxy; the log says so once per tick and proxy (a client retrying in a
// loop makes one line per 100 ms, not one per connection), with the last reason.
void ProxyFaults::log_upstream_failures() {
  std::map<std::string, uint64_t> now;
  for (const ProxyInfo& p : registry_->list()) {
    auto st = registry_->stats(p.config.name);
    if (!st) continue;
    const uint64_t failed = st->upstream_unresolved + st->upstream_unreachable;
    now[p.config.name] = failed;
    auto seen = upstream_failures_logged_.find(p.config.name);
    const uint64_t before = seen == upstream_failures_logged_.end() ? 0 : seen->second;
    if (failed > before)
      log_("faultd: proxy " + p.config.name + ": " + std::to_string(failed - before) +
           " connection(s) closed after accept, the upstream " + p.config.upstream +
           " could not be reached: " + st->last_upstream_failure);
  }
  upstream_failures_logged_ = std::move(now);
}

Result<ProxyFaults::Handover> ProxyFaults::handover() const {
  auto all = registry_->listeners();
  if (!all) return all.error();
  Handover h;
  h.state = nlohmann::json::array();
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : *all) {
    nlohmann::json pj = toxiproxy_proxy_json(p.info);
    nlohmann::json ages = nlohmann::json::object();
    for (const auto& [key, since] : started_) {
      if (key.first == p.info.config.name)
        ages[key.second] = std::chrono::duration_cast<std::chrono::milliseconds>(now - since).count();
    }
    pj["ages_ms"] = ages;
    pj["http"] = p.info.http;
    pj["http_limits"] = {{"max_header_bytes", p.info.http_limits.max_header_bytes},
                         {"max_headers", p.info.http_limits.max_headers},
                         {"head_timeout_ms", p.info.http_limits.head_timeout_ms}};
    // In the order added; an HTTP toxic carries its toxic form too (the
    // toxics list shows it, and adopt() skips it there).
    pj["http_faults"] = nlohmann::json::array();
    for (const HttpFault& f : p.info.http_faults) {
      nlohmann::json fj = http_fault_to_json(f);
      if (f.toxic) fj["toxic"] = http_toxic_to_json(f);
      pj["http_faults"].push_back(std::move(fj));
    }
    pj["listeners"] = nlohmann::json::array();
    for (auto& fd : p.listeners) {
      pj["listeners"].push_back(fd.get());
      h.fds.push_back(std::move(fd));
    }
    h.state.push_back(std::move(pj));
  }
  return h;
}

Status ProxyFaults::adopt(const nlohmann::json& state) {
  if (!state.is_array()) return make_error(EINVAL, "handover: \"proxies\" is not an array");
  const auto now = Clock::now();
  for (const auto& pj : state) {
    try {
      ProxyInfo info;
      ProxyConfig& c = info.config;
      c.name = pj.at("name").get<std::string>();
      c.listen = pj.at("listen").get<std::string>();
      c.upstream = pj.at("upstream").get<std::string>();
      c.enabled = pj.at("enabled").get<bool>();
      auto tls = toxiproxy_proxy_tls(pj, c.upstream);
      if (!tls) return make_error(EINVAL, "handover: proxy " + c.name + ": " + tls.error().message);
      c.tls = *tls;
      for (const auto& tj : pj.at("toxics")) {
        if (tj.contains("type") && tj["type"].is_string() && is_http_toxic_type(tj["type"].get<std::string>()))
          continue;  // an HTTP toxic: among the HTTP faults
        auto t = toxic_from_json(tj);
        if (!t) return make_error(EINVAL, "handover: proxy " + c.name + ": " + t.error().message);
        info.toxics.push_back(*t);
      }
      info.http = pj.at("http").get<bool>();
      if (c.tls) info.http_tls = *c.tls;
      const auto& lim = pj.at("http_limits");
      info.http_limits = {lim.at("max_header_bytes").get<uint32_t>(), lim.at("max_headers").get<uint32_t>(),
                          lim.at("head_timeout_ms").get<uint32_t>()};
      for (const auto& fj : pj.at("http_faults")) {
        auto f = fj.contains("toxic") ? http_toxic_from_json(fj["toxic"]) : http_fault_from_json(fj);
        if (!f) return make_error(EINVAL, "handover: proxy " + c.name + ": " + f.error().message);
        info.http_faults.push_back(*f);
      }
      std::vector<UniqueFd> fds;
      for (const auto& fd : pj.at("listeners")) fds.emplace_back(fd.get<int>());
      auto made = registry_->adopt(info, std::move(fds));
      if (!made) return make_error(made.error().err, "handover: proxy " + c.name + ": " + made.error().describe());
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [what, ms] : pj.at("ages_ms").items())
        started_[{c.name, what}] = now - std::chrono::milliseconds(ms.get<int64_t>());
    } catch (const nlohmann::json::exception& e) {
      return make_error(EINVAL, std::string("handover: a proxy: ") + e.what());
    }
  }
  return {};
}

nlohmann::json ProxyFaults::status_json() const {
  nlohmann::json out = nlohmann::json::array();
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto ends_in = [&](const std::string& proxy, const std::string& what) -> int64_t {
    auto it = started_.find({proxy, what});
    const auto start = it == started_.end() ? now : it->second;
    const auto left = std::chrono::nanoseconds(toxic_max_ns_) - (now - start);
    return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(left).count());
  };
  for (const ProxyInfo& p : registry_->list()) {
    nlohmann::json pj = toxiproxy_proxy_json(p);
    for (size_t i = 0; i < p.toxics.size(); ++i)
      pj["toxics"][i]["left_s"] = ends_in(p.config.name, toxic_key(p.toxics[i].name));
    // The HTTP toxics follow the toxics in toxiproxy_proxy_json; bounded as HTTP faults.
    for (size_t i = p.toxics.size(); i < pj["toxics"].size(); ++i)
      pj["toxics"][i]["left_s"] = ends_in(p.config.name, http_key(pj["toxics"][i]["name"].get<std::string>()));
    if (!p.config.enabled) pj["down_left_s"] = ends_in(p.config.name, kDown);
    if (!p.http_faults.empty()) {
      pj["http_faults"] = nlohmann::json::array();
      for (const HttpFault& f : p.http_faults) {
        if (f.toxic) continue;  // listed with the toxics
        nlohmann::json fj = http_fault_to_json(f);
        fj["left_s"] = ends_in(p.config.name, http_key(f.name));
        pj["http_faults"].push_back(std::move(fj));
      }
    }
    if (auto st = registry_->stats(p.config.name)) {
      pj["counters"] = {{"connections_accepted", st->connections_accepted},
                        {"connections_active", st->connections_active},
                        {"bytes_upstream", st->bytes_upstream},
                        {"bytes_downstream", st->bytes_downstream}};
    }
    out.push_back(std::move(pj));
  }
  return out;
}

std::string ProxyFaults::status_text() const {
  const nlohmann::json all = status_json();
  if (all.empty()) return "";
  std::ostringstream o;
  o << "PROXIES (faultd; Toxiproxy API)\n";
  for (const auto& p : all) {
    o << "  " << p["name"].get<std::string>() << "  " << p["listen"].get<std::string>() << " -> "
      << p["upstream"].get<std::string>();
    if (!p["enabled"].get<bool>()) o << "  DOWN (ends in " << p["down_left_s"].get<int64_t>() << " s)";
    if (p.contains("counters"))
      o << "  connections " << p["counters"]["connections_active"] << " open, " << p["counters"]["connections_accepted"]
        << " accepted";
    o << "\n";
    for (const auto& t : p["toxics"]) {
      o << "    toxic " << t["name"].get<std::string>() << ": " << t["type"].get<std::string>() << " "
        << t["stream"].get<std::string>() << " toxicity " << t["toxicity"].dump() << " " << t["attributes"].dump()
        << " (ends in " << t["left_s"].get<int64_t>() << " s)\n";
    }
    if (p.contains("http_faults")) {
      for (const auto& f : p["http_faults"]) {
        o << "    http " << f["name"].get<std::string>() << ": " << f["type"].get<std::string>() << " match "
          << f["match"].dump() << " percent " << f["percent"].dump() << " " << f["attributes"].dump() << " (ends in "
          << f["left_s"].get<int64_t>() << " s)\n";
      }
    }
  }
  return o.str();
}

void ProxyFaults::append_metrics(MetricsText& m) const {
  const std::vector<ProxyInfo> proxies = registry_->list();
  std::vector<std::pair<std::string, ProxyStats>> stats;
  for (const ProxyInfo& p : proxies) {
    if (auto st = registry_->stats(p.config.name)) stats.emplace_back(p.config.name, *st);
  }
  m.family("faultline_proxy_up", "gauge", "1 when the proxy listens (Toxiproxy's enabled), 0 when it is down");
  for (const ProxyInfo& p : proxies) m.sample({{"proxy", p.config.name}}, p.config.enabled ? 1 : 0);
  m.family("faultline_proxy_connections_accepted_total", "counter", "Connections the proxy accepted");
  for (const auto& [name, st] : stats) m.sample({{"proxy", name}}, st.connections_accepted);
  m.family("faultline_proxy_connections_active", "gauge", "Connections the proxy relays now");
  for (const auto& [name, st] : stats) m.sample({{"proxy", name}}, st.connections_active);
  m.family("faultline_proxy_bytes_total", "counter",
           "Bytes the proxy relayed, upstream (client to server) and downstream (server to client)");
  for (const auto& [name, st] : stats) {
    m.sample({{"proxy", name}, {"direction", "upstream"}}, st.bytes_upstream);
    m.sample({{"proxy", name}, {"direction", "downstream"}}, st.bytes_downstream);
  }
  m.family("faultline_proxy_upstream_failures_total", "counter",
           "Connections closed after accept because the upstream could not be had: its name did not resolve "
           "(reason=\"resolve\") or the connect failed (reason=\"connect\")");
  for (const auto& [name, st] : stats) {
    m.sample({{"proxy", name}, {"reason", "resolve"}}, st.upstream_unresolved);
    m.sample({{"proxy", name}, {"reason", "connect"}}, st.upstream_unreachable);
  }
  m.family("faultline_proxy_toxic_activations_total", "counter",
           "Connections a toxic was applied to (its toxicity drawn in favour)");
  for (const auto& [name, st] : stats) {
    for (const ToxicActivations& t : st.toxics) m.sample({{"proxy", name}, {"toxic", t.toxic}}, t.connections);
  }
  m.family("faultline_proxy_http_fault_requests_total", "counter",
           "Requests an HTTP fault was applied to (matched, and its percent and attempts drawn in favour)");
  for (const auto& [name, st] : stats) {
    for (const ToxicActivations& f : st.http_faults) m.sample({{"proxy", name}, {"fault", f.toxic}}, f.connections);
  }
}

}  // namespace faultline
