// What a Kubernetes API request does, as the guard's rules see it: the RBAC
// verb, the resource (with its subresource and API group), the namespace and
// the name, read from the request's method, path and query the way the API
// server's own request info does. No I/O: the guard asks for every HTTP
// request it sees the path of.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace faultline {

struct K8sRequestFacts {
  // The path is under /api or /apis but not one the guard can read as the API
  // server would (an encoded '/', an empty, '.' or '..' segment, a bad
  // percent escape, a resource path cut short): the facts are unknown.
  // Deny and approve rules with a Kubernetes matcher match it (fail safe),
  // allow rules never do.
  bool unknown = false;
  // RBAC verb: get, list, watch, create, update, patch, delete,
  // deletecollection; "proxy" for the legacy /api/v1/proxy/ prefix. Empty for
  // a method RBAC has no verb for (OPTIONS, ...).
  std::string verb;
  // The resource as RBAC names it: "secrets", "pods/exec" (with its
  // subresource), "deployments.apps" (group-qualified when the API group is
  // not the core one): the form of `kubectl auth can-i VERB RESOURCE`.
  std::string resource;
  std::string api_group;   // "" for the core group (/api/v1)
  std::string namespace_;  // "" for a cluster-scoped request or one across all namespaces
  std::string name;        // "" for a collection (list, create, deletecollection)
};

// The facts of one request, or nothing when it is not a request for an API
// resource: a path outside /api and /apis (a "non-resource URL": /healthz,
// /version, /openapi/v2), or discovery (/api, /api/v1, /apis/apps/v1). The
// target is the request target (origin form "/api/v1/...?watch=true", or
// absolute form "http://host/api/..."). Total on any bytes.
[[nodiscard]] std::optional<K8sRequestFacts> k8s_request_facts(std::string_view method, std::string_view target);

}  // namespace faultline
