// Toxiproxy's REST API: each route parses and judges its whole body before it
// changes anything, then makes one registry call (populate: several, undone on
// failure). Errors are Toxiproxy's envelope, codes and messages.
#include "userspace/daemon/toxiproxy_api.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <variant>

#include "userspace/faults/stream/spec.h"

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

HttpReply json_reply(int status, const json& j) { return HttpReply::json(status, j.dump() + "\n"); }

// The body as a JSON value of the wanted kind, or the reply that refuses it.
std::variant<json, HttpReply> parse_body(const HttpRequest& req, bool want_array) {
  if (req.body.empty()) return bad_body("empty body, expected a JSON " + std::string(want_array ? "array" : "object"));
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return bad_body("not JSON");
  if (want_array ? !j.is_array() : !j.is_object())
    return bad_body(std::string("expected a JSON ") + (want_array ? "array" : "object") + ", got " + j.type_name());
  return j;
}

// One proxy of a create or populate body: name, listen, upstream, enabled.
// Unknown members are refused by name (a misspelt "upstrem" would otherwise be
// a proxy to nowhere); "toxics" only when empty, toxics have their own route.
std::variant<ProxyConfig, HttpReply> proxy_config(const json& j, const std::string& where) {
  if (!j.is_object()) return bad_body(where + "a proxy is a JSON object, got " + std::string(j.type_name()));
  ProxyConfig c;
  c.listen = "127.0.0.1:0";  // Toxiproxy would listen on every address; loopback is the safe default
  for (const auto& [key, v] : j.items()) {
    if (key == "name" || key == "listen" || key == "upstream") {
      if (!v.is_string()) return bad_body(where + "\"" + key + "\" must be a string");
      (key == "name" ? c.name : key == "listen" ? c.listen : c.upstream) = v.get<std::string>();
    } else if (key == "enabled") {
      if (!v.is_boolean()) return bad_body(where + "\"enabled\" must be true or false");
      c.enabled = v.get<bool>();
    } else if (key == "toxics") {
      if (!v.is_array() || !v.empty())
        return bad_body(where + "\"toxics\" are added with POST /proxies/{name}/toxics, not with the proxy");
    } else {
      return bad_body(where + "unknown field \"" + key + "\" (name, listen, upstream, enabled)");
    }
  }
  if (c.name.empty()) return HttpReply::error(400, std::string(kMissingField) + ": name");
  if (c.upstream.empty()) return HttpReply::error(400, std::string(kMissingField) + ": upstream");
  return c;
}

// The members Toxiproxy judges itself, with its own messages; the rest is
// toxic_from_json's (attributes, toxicity, name).
std::optional<HttpReply> precheck_toxic(const json& j) {
  if (j.contains("stream")) {
    const json& s = j["stream"];
    if (!s.is_string() || (s != "upstream" && s != "downstream")) return HttpReply::error(400, kInvalidStream);
  }
  if (j.contains("type")) {
    const json& t = j["type"];
    if (!t.is_string() || !is_toxic_type(t.get_ref<const std::string&>()))
      return HttpReply::error(400, kInvalidToxicType);
  }
  return std::nullopt;
}

HttpReply create_proxy(ProxyRegistry& reg, const HttpRequest& req) {
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  auto config = proxy_config(std::get<json>(body), "");
  if (auto* r = std::get_if<HttpReply>(&config)) return *r;
  auto made = reg.create(std::get<ProxyConfig>(config));
  if (!made) return registry_error(made.error(), kProxyNotFound, kProxyExists);
  return json_reply(201, toxiproxy_proxy_json(*made));
}

HttpReply update_proxy(ProxyRegistry& reg, const HttpRequest& req, const std::string& name) {
  auto current = reg.get(name);
  if (!current) return registry_error(current.error(), kProxyNotFound, kProxyExists);
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  ProxyUpdate change;
  for (const auto& [key, v] : std::get<json>(body).items()) {
    if (key == "listen" || key == "upstream") {
      if (!v.is_string() || v.get_ref<const std::string&>().empty())
        return bad_body("\"" + key + "\" must be a non-empty string");
      (key == "listen" ? change.listen : change.upstream) = v.get<std::string>();
    } else if (key == "enabled") {
      if (!v.is_boolean()) return bad_body("\"enabled\" must be true or false");
      change.enabled = v.get<bool>();
    } else if (key == "name") {
      if (v != name) return bad_body("a proxy cannot be renamed (delete it and create another)");
    } else if (key == "toxics") {
      if (!v.is_array()) return bad_body("\"toxics\" must be an array");  // shown back by clients; not changed here
    } else {
      return bad_body("unknown field \"" + key + "\" (listen, upstream, enabled)");
    }
  }
  // An address Toxiproxy shows back (the bound one) is no change.
  if (change.listen && *change.listen == current->listen_bound) change.listen.reset();
  auto updated = reg.update(name, change);
  if (!updated) return registry_error(updated.error(), kProxyNotFound, kProxyExists);
  return json_reply(200, toxiproxy_proxy_json(*updated));
}

// POST /populate: every proxy of the body judged first; then each is created,
// kept (the same listen and upstream) or replaced. A failure undoes what this
// call did: created proxies removed, replaced ones restored with their toxics.
HttpReply populate(ProxyRegistry& reg, const HttpRequest& req) {
  auto body = parse_body(req, true);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  const json& list = std::get<json>(body);
  std::vector<ProxyConfig> wanted;
  std::set<std::string> names;
  for (size_t i = 0; i < list.size(); ++i) {
    auto c = proxy_config(list[i], "proxy " + std::to_string(i) + ": ");
    if (auto* r = std::get_if<HttpReply>(&c)) return *r;
    ProxyConfig config = std::get<ProxyConfig>(c);
    config.enabled = true;  // Toxiproxy's populate starts every proxy
    if (!names.insert(config.name).second) return bad_body("proxy \"" + config.name + "\" is given twice");
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
    HttpReply r = registry_error(e, kProxyNotFound, kProxyExists);
    json j = json::parse(r.body, nullptr, false);
    if (j.is_object()) {
      j["proxies"] = json::array();
      r.body = j.dump() + "\n";
    }
    return r;
  };
  for (const ProxyConfig& c : wanted) {
    if (auto old = reg.get(c.name); old) {
      if (old->config.upstream == c.upstream &&
          (old->config.listen == c.listen || old->listen_bound == c.listen)) {
        if (!old->config.enabled) {
          ProxyUpdate on;
          on.enabled = true;
          auto up = reg.update(c.name, on);
          if (!up) return undo(up.error());
          out.push_back(toxiproxy_proxy_json(*up));
        } else {
          out.push_back(toxiproxy_proxy_json(*old));
        }
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
  if (auto p = reg.get(proxy); !p) return registry_error(p.error(), kProxyNotFound, kProxyExists);
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  const json& j = std::get<json>(body);
  if (auto r = precheck_toxic(j)) return *r;
  if (!j.contains("type")) return HttpReply::error(400, kInvalidToxicType);
  auto toxic = toxic_from_json(j);
  if (!toxic) return HttpReply::error(400, toxic.error().message);
  auto added = reg.add_toxic(proxy, *toxic);
  if (!added) return registry_error(added.error(), kProxyNotFound, kToxicExists);
  return json_reply(200, toxic_to_json(*added));
}

HttpReply update_toxic(ProxyRegistry& reg, const HttpRequest& req, const std::string& proxy,
                       const std::string& name) {
  if (auto p = reg.get(proxy); !p) return registry_error(p.error(), kProxyNotFound, kProxyExists);
  auto current = reg.get_toxic(proxy, name);
  if (!current) return registry_error(current.error(), kToxicNotFound, kToxicExists);
  auto body = parse_body(req, false);
  if (auto* r = std::get_if<HttpReply>(&body)) return *r;
  const json& j = std::get<json>(body);
  if (auto r = precheck_toxic(j)) return *r;
  auto merged = toxic_merged(*current, j);
  if (!merged) return HttpReply::error(400, merged.error().message);
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
    json list = json::array();
    for (const Toxic& t : got->toxics) list.push_back(toxic_to_json(t));
    return json_reply(200, list);
  });
  r.add("POST", "/proxies/{proxy}/toxics",
        [&reg](const HttpRequest& req, const PathParams& p) { return create_toxic(reg, req, p.at("proxy")); });
  r.add("GET", "/proxies/{proxy}/toxics/{toxic}", [&reg](const HttpRequest&, const PathParams& p) {
    if (auto got = reg.get(p.at("proxy")); !got) return registry_error(got.error(), kProxyNotFound, kProxyExists);
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
    if (auto got = reg.get(p.at("proxy")); !got) return registry_error(got.error(), kProxyNotFound, kProxyExists);
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
  // Toxiproxy shows the address it listens on once it does (port 0 resolved).
  return json{{"name", p.config.name},
              {"listen", p.listen_bound.empty() ? p.config.listen : p.listen_bound},
              {"upstream", p.config.upstream},
              {"enabled", p.config.enabled},
              {"toxics", std::move(toxics)}};
}

HttpHandler refuse_browsers(HttpHandler inner) {
  return [inner = std::move(inner)](const HttpRequest& req) {
    if (auto ua = req.header("user-agent"); ua && ua->rfind("Mozilla/", 0) == 0)
      return HttpReply::error(403, "User agent not allowed");
    return inner(req);
  };
}

}  // namespace faultline
