// The local API's routes over the operations faultctl runs (userspace/ops/):
// the same functions, so the same output and exit codes either way.
#include "userspace/daemon/faultd_api.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/exit_code.h"
#include "loader/bpffs.h"
#include "userspace/daemon/metrics.h"
#include "userspace/daemon/proxy_faults.h"
#include "userspace/daemon/run_service.h"
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

// The status report, and faultd's proxies after it: a "proxies" member in JSON,
// a PROXIES section in text.
HttpReply status_with_proxies(const HttpRequest& req, const ProxyFaults* proxies) {
  HttpReply rep = report(req, write_status);
  if (proxies == nullptr || rep.status != 200) return rep;
  // No proxy: the very report faultctl prints standalone.
  nlohmann::json all = proxies->status_json();
  if (all.empty()) return rep;
  if (req.query_param("format").value_or("json") == "json") {
    nlohmann::json j = nlohmann::json::parse(rep.body, nullptr, false);
    if (!j.is_object()) return rep;
    j["proxies"] = std::move(all);
    rep.body = j.dump() + "\n";
  } else {
    const std::string more = proxies->status_text();
    if (!more.empty()) rep.body += (rep.body.empty() || rep.body.back() == '\n' ? "" : "\n") + more;
  }
  return rep;
}

}  // namespace

HttpRouter local_api_router(ProxyFaults* proxies, RunService* runs) {
  HttpRouter r;
  r.add("GET", "/v1/status",
        [proxies](const HttpRequest& req, const PathParams&) { return status_with_proxies(req, proxies); });
  r.add("GET", "/v1/features", [](const HttpRequest& req, const PathParams&) { return report(req, write_features); });
  r.add("POST", "/v1/faults/{id}/abort", [](const HttpRequest&, const PathParams& p) {
    const std::string& id = p.at("id");
    if (!is_fault_id(id))
      return HttpReply::error(400, "'" + id + "' is not a fault ID (a number, rN, sN or gN from faultctl status)");
    std::ostringstream out, err;
    const int code = abort_fault(id, out, err);
    return command_reply(code, out.str(), err.str());
  });
  r.add("POST", "/v1/abort-all", [proxies](const HttpRequest&, const PathParams&) {
    std::ostringstream out, err;
    const int code = abort_all_faults(out, err);
    if (proxies != nullptr) {
      if (size_t n = proxies->end_all("abort --all"); n > 0)
        out << "faultd: " << n << " proxy faults ended (every toxic removed, every proxy up)\n";
    }
    return command_reply(code, out.str(), err.str());
  });
  r.add("POST", "/v1/runs", [runs](const HttpRequest& req, const PathParams&) {
    if (runs != nullptr) return runs->start(req);
    return HttpReply::error(501,
                            "running experiments through faultd is not served yet: run them with faultctl run, "
                            "which works without faultd");
  });
  return r;
}

HttpRouter metrics_router(const ProxyFaults* proxies) {
  HttpRouter r;
  r.add("GET", "/metrics", [proxies](const HttpRequest&, const PathParams&) {
    HttpReply rep{200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, collect_metrics(proxies)};
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
