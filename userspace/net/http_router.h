// Routes of an HTTP API: method + path pattern -> handler. "/v1/faults/{id}/abort"
// matches one path segment per {name}; a path that matches no pattern is 404, a
// path whose patterns take other methods is 405 with an Allow header.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "userspace/net/http_request.h"

namespace faultline {

// The {name} segments of the matched pattern, percent-decoded.
using PathParams = std::map<std::string, std::string>;
using RouteHandler = std::function<HttpReply(const HttpRequest&, const PathParams&)>;

class HttpRouter {
 public:
  // Routes are tried in the order added. A GET route also answers HEAD.
  void add(std::string method, const std::string& pattern, RouteHandler handler);
  [[nodiscard]] HttpReply route(const HttpRequest& req) const;
  // This router as the handler of a listener (HttpServer); it must outlive it.
  [[nodiscard]] HttpHandler handler() const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;  // "{id}" marks a parameter
    RouteHandler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace faultline
