// The dashboard: its files, compiled into faultcp, served at /dashboard/ with
// a Content-Security-Policy that lets the page load only faultcp's own
// scripts and styles and talk only to faultcp (no CDN, no inline script).
#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"
#include "cp/dashboard/dashboard_assets.h"

namespace faultline::cp {

HttpReply ControlPlane::dashboard_file(const std::string& name) {
  for (const auto& a : dashboard_assets()) {
    if (a.name != name) continue;
    HttpReply r = HttpReply::text(200, std::string(a.body));
    for (auto& [k, v] : r.headers)
      if (k == "Content-Type") v = std::string(a.content_type);
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    r.headers.emplace_back("X-Content-Type-Options", "nosniff");
    r.headers.emplace_back("Referrer-Policy", "no-referrer");
    r.headers.emplace_back("Cache-Control", "no-cache");
    return r;
  }
  return api_error(404, "no such dashboard file");
}

}  // namespace faultline::cp
