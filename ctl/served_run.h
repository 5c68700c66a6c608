// The runs faultd serves for faultctl (POST /v1/runs): faultd's main hands this
// to the daemon, so a served run is parsed and run by the very code of
// `faultctl run`, and prints the same.
#pragma once

#include <nlohmann/json.hpp>

#include "userspace/daemon/run_service.h"

namespace faultline {

// {"args": [words after "run"], ...}: a packet fault, planned here and run
// guarded, printing to the streams. The exit code.
[[nodiscard]] int serve_faultd_run(const nlohmann::json& request, RunStreams& streams);

}  // namespace faultline
