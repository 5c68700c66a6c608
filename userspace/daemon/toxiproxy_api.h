// Toxiproxy's REST API over Faultline's proxies, so that test suites and every
// Toxiproxy client work unchanged against faultd (default 127.0.0.1:8474):
// the routes, status codes, JSON shapes, attribute names and error messages of
// Toxiproxy 2.x. docs/proxy.md lists each route and where we differ.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "userspace/net/http_router.h"
#include "userspace/proxy/proxy_registry.h"

namespace faultline {

// What /version answers in "version": the Toxiproxy API level we follow.
inline constexpr const char* kToxiproxyApiVersion = "2.12.0";

// The routes, over `proxies` (it must outlive the router):
//   POST /reset, GET|POST /proxies, POST /populate,
//   GET|POST|PATCH|DELETE /proxies/{proxy}, GET|POST /proxies/{proxy}/toxics,
//   GET|POST|PATCH|DELETE /proxies/{proxy}/toxics/{toxic}, GET /version.
[[nodiscard]] HttpRouter toxiproxy_router(ProxyRegistry& proxies);

// A proxy as Toxiproxy shows it: name, listen (the bound address once it
// listens), upstream, enabled, toxics.
[[nodiscard]] nlohmann::json toxiproxy_proxy_json(const ProxyInfo& p);

// The proxy's own TLS a proxy's JSON asks for (listen_tls, upstream_tls, ...
// as toxiproxy_proxy_json shows them): its contexts made again (a restart's
// handover), nothing when it has none. Errors are bad input naming the member.
[[nodiscard]] Result<std::optional<HttpTls>> toxiproxy_proxy_tls(const nlohmann::json& proxy,
                                                                 const std::string& upstream);

// Toxiproxy's guard against a web page driving the API from a browser (a
// cross-site request to 127.0.0.1:8474): a User-Agent starting with "Mozilla/"
// gets 403 and nothing changes.
[[nodiscard]] HttpHandler refuse_browsers(HttpHandler inner);

}  // namespace faultline
