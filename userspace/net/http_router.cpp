// Matching a path against the route patterns, segment by segment.
#include "userspace/net/http_router.h"

#include <optional>

namespace faultline {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 1;  // after the leading '/'
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    out.push_back(path.substr(i, slash - i));
    i = slash + 1;
  }
  return out;
}

bool is_param(const std::string& seg) { return seg.size() > 2 && seg.front() == '{' && seg.back() == '}'; }

}  // namespace

void HttpRouter::add(std::string method, const std::string& pattern, RouteHandler handler) {
  routes_.push_back(Route{std::move(method), split_path(pattern), std::move(handler)});
}

HttpReply HttpRouter::route(const HttpRequest& req) const {
  const std::vector<std::string> segs = split_path(req.path);
  std::string allow;
  bool bad_escape = false;
  for (const auto& r : routes_) {
    if (r.segments.size() != segs.size()) continue;
    PathParams params;
    bool match = true;
    for (size_t i = 0; i < segs.size() && match; ++i) {
      if (is_param(r.segments[i])) {
        auto v = percent_decode(segs[i], false);
        if (!v || v->empty()) {
          bad_escape = bad_escape || !v;
          match = false;
        } else {
          params[r.segments[i].substr(1, r.segments[i].size() - 2)] = std::move(*v);
        }
      } else {
        match = r.segments[i] == segs[i];
      }
    }
    if (!match) continue;
    const bool head_as_get = req.method == "HEAD" && r.method == "GET";
    if (r.method == req.method || head_as_get) return r.handler(req, params);
    if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
  }
  if (!allow.empty()) {
    HttpReply rep = HttpReply::error(405, req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")");
    rep.headers.emplace_back("Allow", allow);
    return rep;
  }
  if (bad_escape) return HttpReply::error(400, "malformed percent-escape in " + req.path);
  return HttpReply::error(404, "no such resource: " + req.path);
}

HttpHandler HttpRouter::handler() const {
  return [this](const HttpRequest& req) { return route(req); };
}

}  // namespace faultline
