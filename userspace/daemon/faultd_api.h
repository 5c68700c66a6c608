// faultd's two HTTP APIs: the local API (JSON over the unix socket, root only)
// and /metrics. docs/daemon.md lists every route.
#pragma once

#include "userspace/net/http_router.h"

namespace faultline {

class ProxyFaults;
class RunService;

// GET /v1/status, GET /v1/features, POST /v1/faults/{id}/abort,
// POST /v1/abort-all, and POST /v1/runs (a stream, through runs; 501 without).
// With proxies (faultd's Toxiproxy API), status lists them and abort-all ends
// their faults.
[[nodiscard]] HttpRouter local_api_router(ProxyFaults* proxies = nullptr, RunService* runs = nullptr);
// GET /metrics.
[[nodiscard]] HttpRouter metrics_router(const ProxyFaults* proxies = nullptr);
// Serves only peers whose credentials say uid 0; everyone else gets 403.
[[nodiscard]] HttpHandler root_only(HttpHandler inner);

// The state a client means (its FAULTLINE_BPFFS_ROOT and FAULTLINE_RUN_DIR), sent
// as these headers: a faultd that serves another state answers 409, so a faultctl
// pointed at a private root never reads or ends the host's faults through it.
inline constexpr const char* kBpffsRootHeader = "x-faultline-bpffs-root";
inline constexpr const char* kRunDirHeader = "x-faultline-run-dir";
[[nodiscard]] HttpHandler same_state_only(HttpHandler inner);

}  // namespace faultline
