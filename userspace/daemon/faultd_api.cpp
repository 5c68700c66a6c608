// The local API's routes over the operations faultctl runs (userspace/ops/):
// the same functions, so the same output and exit codes either way.
#include "userspace/daemon/faultd_api.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/exit_code.h"
#include "loader/bpffs.h"
#include "userspace/daemon/metrics.h"
#include "userspace/ops/abort_faults.h"
#include "userspace/ops/features_report.h"
#include "userspace/ops/status_report.h"
#include "userspace/state/state_dir.h"

namespace faultline {
namespace {

// ?format=json (the default) or ?format=text: the document faultctl prints
// with --json, or the table it prints without.
Result<bool> wants_json(const HttpRequest& req) {
  auto f = req.query_param("format");
  if (!f || *f == "json") return true;
  if (*f == "text") return false;
  return input_error(EINVAL, "format must be json or text, not '" + *f + "'");
}

HttpReply report(const HttpRequest& req, int (*write)(bool, std::ostream&)) {
  auto json = wants_json(req);
  if (!json) return HttpReply::error(400, json.error().message);
  std::ostringstream out;
  const int code = write(*json, out);
  if (code != kExitCompleted)
    return HttpReply::error(500, "the report failed (exit code " + std::to_string(code) + ")");
  return *json ? HttpReply::json(200, out.str()) : HttpReply::text(200, out.str());
}

// What faultctl abort prints and its exit code, with the HTTP status that says the same.
HttpReply command_reply(int code, const std::string& out, const std::string& err) {
  const int status = code == kExitCompleted ? 200 : code == kExitBadInput ? 404 : 500;
  nlohmann::json j{{"exit_code", code}, {"output", out}, {"error", err}};
  return HttpReply::json(status, j.dump() + "\n");
}

}  // namespace

HttpRouter local_api_router() {
  HttpRouter r;
  r.add("GET", "/v1/status", [](const HttpRequest& req, const PathParams&) { return report(req, write_status); });
  r.add("GET", "/v1/features", [](const HttpRequest& req, const PathParams&) { return report(req, write_features); });
  r.add("POST", "/v1/faults/{id}/abort", [](const HttpRequest&, const PathParams& p) {
    const std::string& id = p.at("id");
    if (!is_fault_id(id))
      return HttpReply::error(400, "'" + id + "' is not a fault ID (a number, rN, sN or gN from faultctl status)");
    std::ostringstream out, err;
    const int code = abort_fault(id, out, err);
    return command_reply(code, out.str(), err.str());
  });
  r.add("POST", "/v1/abort-all", [](const HttpRequest&, const PathParams&) {
    std::ostringstream out, err;
    const int code = abort_all_faults(out, err);
    return command_reply(code, out.str(), err.str());
  });
  r.add("POST", "/v1/runs", [](const HttpRequest&, const PathParams&) {
    return HttpReply::error(501,
                            "running experiments through faultd is not served yet: run them with faultctl run, "
                            "which works without faultd");
  });
  return r;
}

HttpRouter metrics_router() {
  HttpRouter r;
  r.add("GET", "/metrics", [](const HttpRequest&, const PathParams&) {
    HttpReply rep{200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, collect_metrics()};
    return rep;
  });
  return r;
}

HttpHandler root_only(HttpHandler inner) {
  return [inner = std::move(inner)](const HttpRequest& req) {
    if (!req.peer.has_credentials || req.peer.uid != 0)
      return HttpReply::error(403, "the faultd API serves root only (peer uid " +
                                       (req.peer.has_credentials ? std::to_string(req.peer.uid) : "unknown") + ")");
    return inner(req);
  };
}

HttpHandler same_state_only(HttpHandler inner) {
  return [inner = std::move(inner), root = bpffs_layout().root, run = state_root()](const HttpRequest& req) {
    const auto want_root = req.header(kBpffsRootHeader);
    const auto want_run = req.header(kRunDirHeader);
    if ((want_root && *want_root != root) || (want_run && *want_run != run))
      return HttpReply::error(409, "this faultd serves the state at " + root + " and " + run + ", not " +
                                       want_root.value_or(root) + " and " + want_run.value_or(run));
    return inner(req);
  };
}

}  // namespace faultline
