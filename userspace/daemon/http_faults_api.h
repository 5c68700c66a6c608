// Faultline's extension of the Toxiproxy API: HTTP faults on a named proxy
// (/proxies/{proxy}/http_faults) and its HTTP limits (/proxies/{proxy}/http_limits).
// Same envelope, codes and all-or-nothing judging as the Toxiproxy routes.
#pragma once

#include "userspace/net/http_router.h"
#include "userspace/proxy/proxy_registry.h"

namespace faultline {

// Adds the routes to `router` (the Toxiproxy API's); `reg` must outlive it.
void add_http_fault_routes(HttpRouter& router, ProxyRegistry& reg);

}  // namespace faultline
