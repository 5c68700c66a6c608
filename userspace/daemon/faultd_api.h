// faultd's two HTTP APIs: the local API (JSON over the unix socket, root only)
// and /metrics. docs/daemon.md lists every route.
#pragma once

#include "userspace/net/http_router.h"

namespace faultline {

// GET /v1/status, GET /v1/features, POST /v1/faults/{id}/abort,
// POST /v1/abort-all, and POST /v1/runs (501: not served yet).
[[nodiscard]] HttpRouter local_api_router();
// GET /metrics.
[[nodiscard]] HttpRouter metrics_router();
// Serves only peers whose credentials say uid 0; everyone else gets 403.
[[nodiscard]] HttpHandler root_only(HttpHandler inner);

}  // namespace faultline
