// Toxiproxy's REST API: each route parses and judges its whole body before it
// changes anything, then makes one registry call (populate: several, undone on
// failure). What is accepted, and with which code, follows Toxiproxy's api.go,
// proxy_collection.go and toxic_collection.go (its JSON decoder ignores unknown
// members and null; it judges no toxic attribute); errors are its envelope.
#include "userspace/daemon/toxiproxy_api.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <variant>

#include "userspace/proxy/http_toxic.h"
#include "userspace/proxy/tls_setup.h"

namespace faultline {
namespace {

using json = nlohmann::json;

// Toxiproxy's messages (its api.go), so clients that match on them still do.
constexpr const char* kBadBody = "bad request body";
constexpr const char* kMissingField = "missing required field";
constexpr const char* kProxyNotFound = "proxy not found";
constexpr const char* kProxyExists = "proxy already exists";
constexpr const char* kToxicNotFound = "toxic not found";
constexpr const char* kToxicExists = "toxic already exists";
constexpr const char* kInvalidStream = "stream was invalid, can be either upstream or downstream";
constexpr const char* kInvalidToxicType = "invalid toxic type";

HttpReply bad_body(const std::string& why) { return HttpReply::error(400, std::string(kBadBody) + ": " + why); }

// A registry error as Toxiproxy answers it; `not_found` and `exists` name what
// the route was about (a proxy or a toxic).
HttpReply registry_error(const Error& e, const char* not_found, const char* exists) {
  if (e.err == ENOENT) return HttpReply::error(404, not_found);
  if (e.err == EEXIST) return HttpReply::error(409, exists);
  if (e.bad_input || e.err == EINVAL) return HttpReply::error(400, e.message);
  return HttpReply::error(500, e.describe());
}

// A proxy that cannot start (its listen address is bad or taken): Toxiproxy
// passes net.Listen's error on as a 500.
HttpReply proxy_start_error(const Error& e) {
  if (e.err == ENOENT) return HttpReply::error(404, kProxyNotFound);
  if (e.err == EEXIST) return HttpReply::error(409, kProxyExists);
  return HttpReply::error(500, e.message.empty() ? e.describe() : e.message);
}

HttpReply json_reply(int status, const json& j) { return HttpReply::json(status, j.dump() + "\n"); }

// The body as a JSON value of the wanted kind, or the reply that refuses it.
std::variant<json, HttpReply> parse_body(const HttpRequest& req, bool want_array) {
  if (req.body.empty()) return bad_body("EOF");  // Go's decoder on an empty body
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return bad_body("not JSON");
  if (want_array ? !j.is_array() : !j.is_object())
    return bad_body(std::string("expected a JSON ") + (want_array ? "array" : "object") + ", got " + j.type_name());
  return j;
}

// The TLS members of a proxy body (a Faultline extension, docs/proxy.md
// "TLS"): listen_tls (true, or {"cert", "key"} files), upstream_tls (a
// boolean), upstream_ca, client_cert, client_key (files), applied over
// `spec`. Nothing when the body has none of them.
std::variant<std::optional<ProxyTlsSpec>, HttpReply> read_tls_members(const json& j, ProxyTlsSpec spec,
                                                                      const std::string& at) {
  bool given = false;
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "listen_tls") {
      given = true;
      spec.cert.clear();
      spec.key.clear();
      if (v.is_boolean()) {
        spec.listen = v.get<bool>();
      } else if (v.is_object()) {
        spec.listen = true;
        for (const auto& [k, f] : v.items()) {
          if (k != "cert" && k != "key") return bad_body("\"listen_tls." + k + "\": unknown member (cert, key)" + at);
          if (!f.is_string()) return bad_body("\"listen_tls." + k + "\" must be a string (a file)" + at);
          (k == "cert" ? spec.cert : spec.key) = f.get<std::string>();
        }
      } else {
        return bad_body("\"listen_tls\" must be true, false or {\"cert\", \"key\"}" + at);
      }
    } else if (key == "upstream_tls") {
      given = true;
      if (!v.is_boolean()) return bad_body("\"upstream_tls\" must be true or false" + at);
      spec.upstream = v.get<bool>();
    } else if (key == "upstream_ca" || key == "client_cert" || key == "client_key") {
      given = true;
      if (!v.is_string()) return bad_body("\"" + key + "\" must be a string (a file)" + at);
      (key == "upstream_ca"   ? spec.upstream_ca
       : key == "client_cert" ? spec.client_cert
                              : spec.client_key) = v.get<std::string>();
    }
  }
  if (!given) return std::optional<ProxyTlsSpec>();
  return std::optional<ProxyTlsSpec>(spec);
}

// The contexts a TLS spec asks for, its upstream checked for the upstream's
// host; nothing when it asks for no TLS. Files are read now: a bad one is a 400.
std::variant<std::optional<HttpTls>, HttpReply> proxy_tls(const ProxyTlsSpec& spec, const std::string& upstream,
                                                          const std::string& at) {
  if (!spec.listen && !spec.upstream && spec == ProxyTlsSpec{}) return std::optional<HttpTls>();
  auto hp = split_endpoint(upstream, "upstream");
  auto tls = set_up_proxy_tls(spec, hp ? hp->host : upstream);
  if (!tls) return HttpReply::error(tls.error().bad_input ? 400 : 500, tls.error().message + at);
  return std::optional<HttpTls>(std::move(*tls));
}

// One proxy of a create or populate body: name, listen, upstream, enabled.
// As Toxiproxy's decoder: other members (its "toxics" among them) are ignored,
// null is absent, a member of the wrong type is a bad body. `at` names the
// proxy in a populate (" at proxy 2").
std::variant<ProxyConfig, HttpReply> proxy_config(const json& j, const std::string& at) {
  if (!j.is_object()) return bad_body("a proxy is a JSON object, got " + std::string(j.type_name()) + at);
  ProxyConfig c;
  c.listen = "127.0.0.1:0";  // Toxiproxy would listen on every address; loopback is the safe default
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "name" || key == "listen" || key == "upstream") {
      if (!v.is_string()) return bad_body("\"" + key + "\" must be a string" + at);
      (key == "name" ? c.name : key == "listen" ? c.listen : c.upstream) = v.get<std::string>();
    } else if (key == "enabled") {
      if (!v.is_boolean()) return bad_body("\"enabled\" must be true or false" + at);
      c.enabled = v.get<bool>();
    }
  }
  if (c.listen.empty()) c.listen = "127.0.0.1:0";
  if (c.name.empty()) return HttpReply::error(400, std::string(kMissingField) + ": name" + at);
  if (c.upstream.empty()) return HttpReply::error(400, std::string(kMissingField) + ": upstream" + at);
  auto spec = read_tls_members(j, {}, at);
  if (auto* r = std::get_if<HttpReply>(&spec)) return *r;
  if (const auto& s = std::get<std::optional<ProxyTlsSpec>>(spec)) {
    auto tls = proxy_tls(*s, c.upstream, at);
    if (auto* r = std::get_if<HttpReply>(&tls)) return *r;
    c.tls = std::get<std::optional<HttpTls>>(tls);
  }
  return c;
}

// The HTTP toxic (an HTTP fault made through these routes) called `name`.
std::optional<HttpFault> http_toxic_named(const ProxyInfo& p, const std::string& name) {
  for (const HttpFault& f : p.http_faults)
    if (f.toxic && f.name == name) return f;
  return std::nullopt;
}

// A new toxic judged in Toxiproxy's order: the body decodes (a member of the
// wrong type is a bad body), the stream is valid, the type is known, the name
// is free (409 before any attribute is read), then the attributes decode.
// An HTTP toxic type (http_toxic.h) is judged the same way, then read as an HTTP fault.
std::variant<Toxic, HttpFault, HttpReply> judge_new_toxic(const ProxyRegistry& reg, const ProxyInfo& p, const json& j) {
  for (const char* key : {"name", "type", "stream"}) {
    if (auto v = j.find(key); v != j.end() && !v->is_null() && !v->is_string())
      return bad_body(std::string("\"") + key + "\" must be a string");
  }
  if (auto v = j.find("toxicity"); v != j.end() && !v->is_null() && !v->is_number())
    return bad_body("\"toxicity\" must be a number");
  if (auto v = j.find("stream"); v != j.end() && v->is_string()) {
    json probe = json{{"type", "noop"}, {"stream", *v}};
    if (!toxic_from_json(probe)) return HttpReply::error(400, kInvalidStream);
  }
  // Toxiproxy's types and Faultline's extensions (limit_time, slow_open).
  auto t = j.find("type");
  if (t == j.end() || !t->is_string() ||
      !(is_http_toxic_type(t->get_ref<const std::string&>()) || toxic_from_json(json{{"type", *t}})))
    return HttpReply::error(400, kInvalidToxicType);
  // The name a toxic gets: its own, or <type>_<stream> (the stream as given).
  std::string name = j.value("name", json()).is_string() ? j["name"].get<std::string>() : "";
  if (name.empty())
    name = t->get<std::string>() + "_" +
           (j.contains("stream") && j["stream"].is_string() ? j["stream"].get<std::string>() : "downstream");
  const std::string& proxy = p.config.name;
  // One name space for /toxics/{name}: the toxics and the proxy's HTTP faults.
  if (reg.get_toxic(proxy, name) || reg.get_http_fault(proxy, name)) return HttpReply::error(409, kToxicExists);
  json body = j;
  body["name"] = name;
  if (is_http_toxic_type(t->get_ref<const std::string&>())) {
    auto fault = http_toxic_from_json(body);
    if (!fault) return bad_body(fault.error().message);
    return *fault;
  }
  auto toxic = toxic_from_json(body);
  if (!toxic) return bad_body(toxic.error().message);
  return *toxic;
}

HttpReply create_proxy(ProxyRegistry& reg, const HttpRequest& req) {
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  auto config = proxy_config(std::get<json>(body), "");
  if (auto* r = std::get_if<HttpReply>(&config)) return *r;
  auto made = reg.create(std::get<ProxyConfig>(config));
  if (!made) return proxy_start_error(made.error());
  return json_reply(201, toxiproxy_proxy_json(*made));
}

HttpReply update_proxy(ProxyRegistry& reg, const HttpRequest& req, const std::string& name) {
  auto current = reg.get(name);
  if (!current) return registry_error(current.error(), kProxyNotFound, kProxyExists);
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  // As Toxiproxy's: listen, upstream and enabled are read; the rest (a name,
  // the toxics a client shows back) is ignored, null is absent.
  ProxyUpdate change;
  for (const auto& [key, v] : std::get<json>(body).items()) {
    if (v.is_null()) continue;
    if (key == "listen" || key == "upstream") {
      if (!v.is_string()) return bad_body("\"" + key + "\" must be a string");
      (key == "listen" ? change.listen : change.upstream) = v.get<std::string>();
    } else if (key == "enabled") {
      if (!v.is_boolean()) return bad_body("\"enabled\" must be true or false");
      change.enabled = v.get<bool>();
    }
  }
  if (change.listen && change.listen->empty()) change.listen = "127.0.0.1:0";  // as a new proxy's
  // Toxiproxy would keep an empty upstream; a proxy to nowhere is refused here.
  if (change.upstream && change.upstream->empty())
    return HttpReply::error(400, std::string(kMissingField) + ": upstream");
  // An address Toxiproxy shows back (the bound one) is no change.
  if (change.listen && *change.listen == current->listen_bound) change.listen.reset();
  // TLS: the members given over the current ones; a new upstream is checked
  // under its own name. Judged (files read) before anything changes.
  const ProxyTlsSpec current_spec = current->config.tls ? current->config.tls->spec : ProxyTlsSpec{};
  auto spec = read_tls_members(std::get<json>(body), current_spec, "");
  if (auto* r = std::get_if<HttpReply>(&spec)) return *r;
  std::optional<HttpTls> tls;
  const bool tls_changes = std::get<std::optional<ProxyTlsSpec>>(spec).has_value() ||
                           (change.upstream && current->config.tls && current_spec.upstream);
  if (tls_changes) {
    auto made = proxy_tls(std::get<std::optional<ProxyTlsSpec>>(spec).value_or(current_spec),
                          change.upstream.value_or(current->config.upstream), "");
    if (auto* r = std::get_if<HttpReply>(&made)) return *r;
    tls = std::get<std::optional<HttpTls>>(made);
  }
  auto updated = reg.update(name, change);
  if (!updated) return proxy_start_error(updated.error());
  if (tls_changes) {
    if (auto st = reg.set_http_tls(name, tls.value_or(HttpTls{})); !st) return proxy_start_error(st.error());
    updated = reg.get(name);
    if (!updated) return registry_error(updated.error(), kProxyNotFound, kProxyExists);
  }
  return json_reply(200, toxiproxy_proxy_json(*updated));
}

// POST /populate: every proxy of the body judged first; then each is created,
// kept as it is (the same listen and upstream, as Toxiproxy keeps it) or
// replaced. A name given twice: the later entry wins. A failure undoes what
// this call did (created proxies removed, replaced ones restored with their
// toxics), where Toxiproxy would leave the proxies made before it.
HttpReply populate(ProxyRegistry& reg, const HttpRequest& req) {
  auto body = parse_body(req, true);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  const json& list = std::get<json>(body);
  std::vector<ProxyConfig> wanted;
  for (size_t i = 0; i < list.size(); ++i) {
    auto c = proxy_config(list[i], " at proxy " + std::to_string(i + 1));
    if (auto* r = std::get_if<HttpReply>(&c)) return *r;
    ProxyConfig config = std::get<ProxyConfig>(c);
    auto same = std::find_if(wanted.begin(), wanted.end(), [&](const ProxyConfig& w) { return w.name == config.name; });
    if (same != wanted.end())
      *same = std::move(config);
    else
      wanted.push_back(std::move(config));
  }
  std::vector<std::string> created;
  std::vector<ProxyInfo> replaced;
  json out = json::array();
  auto undo = [&](const Error& e) {
    for (const auto& n : created) (void)reg.remove(n);
    for (const ProxyInfo& old : replaced) {
      if (auto back = reg.create(old.config); back) {
        for (const Toxic& t : old.toxics) (void)reg.add_toxic(old.config.name, t);
        if (old.http) (void)reg.set_http_limits(old.config.name, old.http_limits);
        for (const HttpFault& f : old.http_faults) (void)reg.add_http_fault(old.config.name, f);
      }
    }
    HttpReply r = proxy_start_error(e);
    json j = json::parse(r.body, nullptr, false);
    if (j.is_object()) {
      j["proxies"] = json::array();
      r.body = j.dump() + "\n";
    }
    return r;
  };
  for (const ProxyConfig& c : wanted) {
    if (auto old = reg.get(c.name); old) {
      const ProxyTlsSpec old_tls = old->config.tls ? old->config.tls->spec : ProxyTlsSpec{};
      const ProxyTlsSpec new_tls = c.tls ? c.tls->spec : ProxyTlsSpec{};
      if (old->config.upstream == c.upstream && (old->config.listen == c.listen || old->listen_bound == c.listen) &&
          old_tls == new_tls) {
        out.push_back(toxiproxy_proxy_json(*old));
        continue;
      }
      if (auto st = reg.remove(c.name); !st) return undo(st.error());
      replaced.push_back(*old);
    }
    auto made = reg.create(c);
    if (!made) return undo(made.error());
    created.push_back(c.name);
    out.push_back(toxiproxy_proxy_json(*made));
  }
  return json_reply(201, json{{"proxies", out}});
}

HttpReply create_toxic(ProxyRegistry& reg, const HttpRequest& req, const std::string& proxy) {
  auto p = reg.get(proxy);
  if (!p) return registry_error(p.error(), kProxyNotFound, kProxyExists);
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  auto toxic = judge_new_toxic(reg, *p, std::get<json>(body));
  if (auto* r = std::get_if<HttpReply>(&toxic)) return *r;
  if (auto* f = std::get_if<HttpFault>(&toxic)) {
    auto added = reg.add_http_fault(proxy, *f);
    if (!added) return registry_error(added.error(), kProxyNotFound, kToxicExists);
    return json_reply(200, http_toxic_to_json(*added));
  }
  auto added = reg.add_toxic(proxy, std::get<Toxic>(toxic));
  if (!added) return registry_error(added.error(), kProxyNotFound, kToxicExists);
  return json_reply(200, toxic_to_json(*added));
}

HttpReply update_toxic(ProxyRegistry& reg, const HttpRequest& req, const std::string& proxy, const std::string& name) {
  auto p = reg.get(proxy);
  if (!p) return registry_error(p.error(), kProxyNotFound, kProxyExists);
  if (auto http = http_toxic_named(*p, name)) {
    auto body = parse_body(req, false);
    if (auto* r = std::get_if<HttpReply>(&body)) return *r;
    auto merged = http_toxic_merged(*http, std::get<json>(body));
    if (!merged) return bad_body(merged.error().message);
    auto updated = reg.update_http_fault(proxy, name, *merged);
    if (!updated) return registry_error(updated.error(), kToxicNotFound, kToxicExists);
    return json_reply(200, http_toxic_to_json(*updated));
  }
  auto current = reg.get_toxic(proxy, name);
  if (!current) return registry_error(current.error(), kToxicNotFound, kToxicExists);
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  auto merged = toxic_merged(*current, std::get<json>(body));
  if (!merged) return bad_body(merged.error().message);
  auto updated = reg.update_toxic(proxy, name, *merged);
  if (!updated) return registry_error(updated.error(), kToxicNotFound, kToxicExists);
  return json_reply(200, toxic_to_json(*updated));
}

}  // namespace

HttpRouter toxiproxy_router(ProxyRegistry& reg) {
  HttpRouter r;
  r.add("POST", "/reset", [&reg](const HttpRequest&, const PathParams&) {
    if (auto st = reg.reset(); !st) return HttpReply::error(500, st.error().describe());
    return HttpReply{204, {}, {}};
  });
  r.add("GET", "/proxies", [&reg](const HttpRequest&, const PathParams&) {
    json all = json::object();
    for (const ProxyInfo& p : reg.list()) all[p.config.name] = toxiproxy_proxy_json(p);
    return json_reply(200, all);
  });
  r.add("POST", "/proxies", [&reg](const HttpRequest& req, const PathParams&) { return create_proxy(reg, req); });
  r.add("POST", "/populate", [&reg](const HttpRequest& req, const PathParams&) { return populate(reg, req); });
  r.add("GET", "/proxies/{proxy}", [&reg](const HttpRequest&, const PathParams& p) {
    auto got = reg.get(p.at("proxy"));
    if (!got) return registry_error(got.error(), kProxyNotFound, kProxyExists);
    return json_reply(200, toxiproxy_proxy_json(*got));
  });
  for (const char* method : {"POST", "PATCH"}) {
    r.add(method, "/proxies/{proxy}",
          [&reg](const HttpRequest& req, const PathParams& p) { return update_proxy(reg, req, p.at("proxy")); });
  }
  r.add("DELETE", "/proxies/{proxy}", [&reg](const HttpRequest&, const PathParams& p) {
    if (auto st = reg.remove(p.at("proxy")); !st) return registry_error(st.error(), kProxyNotFound, kProxyExists);
    return HttpReply{204, {}, {}};
  });
  r.add("GET", "/proxies/{proxy}/toxics", [&reg](const HttpRequest&, const PathParams& p) {
    auto got = reg.get(p.at("proxy"));
    if (!got) return registry_error(got.error(), kProxyNotFound, kProxyExists);
    return json_reply(200, toxiproxy_proxy_json(*got)["toxics"]);
  });
  r.add("POST", "/proxies/{proxy}/toxics",
        [&reg](const HttpRequest& req, const PathParams& p) { return create_toxic(reg, req, p.at("proxy")); });
  r.add("GET", "/proxies/{proxy}/toxics/{toxic}", [&reg](const HttpRequest&, const PathParams& p) {
    auto got = reg.get(p.at("proxy"));
    if (!got) return registry_error(got.error(), kProxyNotFound, kProxyExists);
    if (auto http = http_toxic_named(*got, p.at("toxic"))) return json_reply(200, http_toxic_to_json(*http));
    auto t = reg.get_toxic(p.at("proxy"), p.at("toxic"));
    if (!t) return registry_error(t.error(), kToxicNotFound, kToxicExists);
    return json_reply(200, toxic_to_json(*t));
  });
  for (const char* method : {"POST", "PATCH"}) {
    r.add(method, "/proxies/{proxy}/toxics/{toxic}", [&reg](const HttpRequest& req, const PathParams& p) {
      return update_toxic(reg, req, p.at("proxy"), p.at("toxic"));
    });
  }
  r.add("DELETE", "/proxies/{proxy}/toxics/{toxic}", [&reg](const HttpRequest&, const PathParams& p) {
    auto got = reg.get(p.at("proxy"));
    if (!got) return registry_error(got.error(), kProxyNotFound, kProxyExists);
    if (http_toxic_named(*got, p.at("toxic"))) {
      if (auto st = reg.remove_http_fault(p.at("proxy"), p.at("toxic")); !st)
        return registry_error(st.error(), kToxicNotFound, kToxicExists);
      return HttpReply{204, {}, {}};
    }
    if (auto st = reg.remove_toxic(p.at("proxy"), p.at("toxic")); !st)
      return registry_error(st.error(), kToxicNotFound, kToxicExists);
    return HttpReply{204, {}, {}};
  });
  r.add("GET", "/version", [](const HttpRequest&, const PathParams&) {
    return json_reply(200, json{{"version", kToxiproxyApiVersion}});
  });
  return r;
}

json toxiproxy_proxy_json(const ProxyInfo& p) {
  json toxics = json::array();
  for (const Toxic& t : p.toxics) toxics.push_back(toxic_to_json(t));
  for (const HttpFault& f : p.http_faults)
    if (f.toxic) toxics.push_back(http_toxic_to_json(f));
  // Toxiproxy shows the address it listens on once it does (port 0 resolved).
  json out{{"name", p.config.name},
           {"listen", p.listen_bound.empty() ? p.config.listen : p.listen_bound},
           {"upstream", p.config.upstream},
           {"enabled", p.config.enabled},
           {"toxics", std::move(toxics)}};
  // A proxy's own TLS, only when it has some (Toxiproxy's clients see nothing new).
  if (p.config.tls) {
    const ProxyTlsSpec& s = p.config.tls->spec;
    if (s.listen) out["listen_tls"] = s.cert.empty() ? json(true) : json{{"cert", s.cert}, {"key", s.key}};
    if (s.upstream) out["upstream_tls"] = true;
    if (!s.upstream_ca.empty()) out["upstream_ca"] = s.upstream_ca;
    if (!s.client_cert.empty()) out["client_cert"] = s.client_cert;
    if (!s.client_key.empty()) out["client_key"] = s.client_key;
  }
  return out;
}

Result<std::optional<HttpTls>> toxiproxy_proxy_tls(const json& proxy, const std::string& upstream) {
  auto spec = read_tls_members(proxy, {}, "");
  if (auto* r = std::get_if<HttpReply>(&spec)) return input_error(EINVAL, r->body);
  const auto& s = std::get<std::optional<ProxyTlsSpec>>(spec);
  if (!s) return std::optional<HttpTls>();
  auto tls = proxy_tls(*s, upstream, "");
  if (auto* r = std::get_if<HttpReply>(&tls)) return input_error(EINVAL, r->body);
  return std::get<std::optional<HttpTls>>(tls);
}

HttpHandler refuse_browsers(HttpHandler inner) {
  return [inner = std::move(inner)](const HttpRequest& req) {
    if (auto ua = req.header("user-agent"); ua && ua->rfind("Mozilla/", 0) == 0)
      return HttpReply::error(403, "User agent not allowed");
    return inner(req);
  };
}

}  // namespace faultline
