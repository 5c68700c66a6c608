// The HTTP fault routes: each judges its whole body before it makes one
// registry call, so a refused request changes nothing.
#include "userspace/daemon/http_faults_api.h"

#include <nlohmann/json.hpp>

namespace faultline {
namespace {

using json = nlohmann::json;

HttpReply http_json_reply(int status, const json& j) { return HttpReply::json(status, j.dump() + "\n"); }

HttpReply http_registry_error(const Error& e, const char* not_found, const char* exists) {
  if (e.err == ENOENT) return HttpReply::error(404, not_found);
  if (e.err == EEXIST) return HttpReply::error(409, exists);
  if (e.bad_input || e.err == EINVAL) return HttpReply::error(400, e.message);
  return HttpReply::error(500, e.describe());
}

constexpr const char* kNoProxy = "proxy not found";
constexpr const char* kNoFault = "http fault not found";
constexpr const char* kFaultExists = "http fault already exists";

json limits_json(const HttpLimits& l) {
  return json{
      {"max_header_bytes", l.max_header_bytes}, {"max_headers", l.max_headers}, {"head_timeout", l.head_timeout_ms}};
}

HttpReply create_http_fault(ProxyRegistry& reg, const HttpRequest& req, const std::string& proxy) {
  if (auto p = reg.get(proxy); !p) return http_registry_error(p.error(), kNoProxy, kNoProxy);
  const json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return HttpReply::error(400, "bad request body: expected a JSON object");
  auto fault = http_fault_from_json(body);
  if (!fault) return HttpReply::error(400, fault.error().message);
  auto added = reg.add_http_fault(proxy, *fault);
  if (!added) return http_registry_error(added.error(), kNoProxy, kFaultExists);
  return http_json_reply(200, http_fault_to_json(*added));
}

// {"max_header_bytes", "max_headers", "head_timeout" (ms, 0: none)}: the members
// given replace the current ones.
HttpReply set_limits(ProxyRegistry& reg, const HttpRequest& req, const std::string& proxy) {
  auto p = reg.get(proxy);
  if (!p) return http_registry_error(p.error(), kNoProxy, kNoProxy);
  const json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return HttpReply::error(400, "bad request body: expected a JSON object");
  HttpLimits l = p->http_limits;
  for (const auto& [key, v] : body.items()) {
    uint32_t* field = key == "max_header_bytes" ? &l.max_header_bytes
                      : key == "max_headers"    ? &l.max_headers
                      : key == "head_timeout"   ? &l.head_timeout_ms
                                                : nullptr;
    if (field == nullptr)
      return HttpReply::error(
          400, "http limits: \"" + key + "\": unknown field (max_header_bytes, max_headers, head_timeout)");
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 1'000'000'000)
      return HttpReply::error(400,
                              "http limits: \"" + key + "\": must be a whole number 0..1000000000, got " + v.dump());
    *field = v.get<uint32_t>();
  }
  if (auto st = reg.set_http_limits(proxy, l); !st) return http_registry_error(st.error(), kNoProxy, kNoProxy);
  return http_json_reply(200, limits_json(l));
}

}  // namespace

void add_http_fault_routes(HttpRouter& r, ProxyRegistry& reg) {
  r.add("GET", "/proxies/{proxy}/http_faults", [&reg](const HttpRequest&, const PathParams& p) {
    auto got = reg.get(p.at("proxy"));
    if (!got) return http_registry_error(got.error(), kNoProxy, kNoProxy);
    json list = json::array();
    // Those made as toxics (http_toxic.h) are listed, changed and removed there.
    for (const HttpFault& f : got->http_faults)
      if (!f.toxic) list.push_back(http_fault_to_json(f));
    return http_json_reply(200, list);
  });
  r.add("POST", "/proxies/{proxy}/http_faults",
        [&reg](const HttpRequest& req, const PathParams& p) { return create_http_fault(reg, req, p.at("proxy")); });
  r.add("GET", "/proxies/{proxy}/http_faults/{fault}", [&reg](const HttpRequest&, const PathParams& p) {
    if (auto got = reg.get(p.at("proxy")); !got) return http_registry_error(got.error(), kNoProxy, kNoProxy);
    auto f = reg.get_http_fault(p.at("proxy"), p.at("fault"));
    if (!f) return http_registry_error(f.error(), kNoFault, kFaultExists);
    if (f->toxic) return HttpReply::error(404, kNoFault);
    return http_json_reply(200, http_fault_to_json(*f));
  });
  r.add("DELETE", "/proxies/{proxy}/http_faults/{fault}", [&reg](const HttpRequest&, const PathParams& p) {
    if (auto got = reg.get(p.at("proxy")); !got) return http_registry_error(got.error(), kNoProxy, kNoProxy);
    if (auto f = reg.get_http_fault(p.at("proxy"), p.at("fault")); f && f->toxic)
      return HttpReply::error(404, kNoFault);
    if (auto st = reg.remove_http_fault(p.at("proxy"), p.at("fault")); !st)
      return http_registry_error(st.error(), kNoFault, kFaultExists);
    return HttpReply{204, {}, {}};
  });
  r.add("GET", "/proxies/{proxy}/http_limits", [&reg](const HttpRequest&, const PathParams& p) {
    auto got = reg.get(p.at("proxy"));
    if (!got) return http_registry_error(got.error(), kNoProxy, kNoProxy);
    return http_json_reply(200, limits_json(got->http_limits));
  });
  r.add("POST", "/proxies/{proxy}/http_limits",
        [&reg](const HttpRequest& req, const PathParams& p) { return set_limits(reg, req, p.at("proxy")); });
}

}  // namespace faultline
