// HTTP faults as Toxiproxy toxics (a Faultline extension of the Toxiproxy API):
// "http_status", "http_delay", ..., "llm_overloaded" in Toxiproxy's toxic
// envelope ({"name","type","stream","toxicity","attributes"}), read into the
// proxy's HTTP faults (http_fault.h), so a Toxiproxy test suite gets
// protocol-aware faults by adding a toxic. The regular toxics (toxic.h) are
// untouched: these types live beside them.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/proxy/http_fault.h"

namespace faultline {

// "http_status", "llm_rate_limit", ...: one of the HTTP toxic types.
[[nodiscard]] bool is_http_toxic_type(std::string_view type);
// Every HTTP toxic type, in the order the docs list them.
[[nodiscard]] std::vector<std::string_view> http_toxic_types();

// A toxic body of an HTTP toxic type as an HTTP fault. As for a regular toxic:
// "type" required, "name" (default <type>_<stream>), "stream" (any case;
// default downstream), "toxicity" (any number; drawn per request, below 0
// never, above 1 always), null = absent. Unlike a regular toxic, the
// attributes are judged: one the type does not have, or a bad value, is bad
// input naming it: `toxic: "attributes.status": must be 100..599, got 42`.
[[nodiscard]] Result<HttpFault> http_toxic_from_json(const nlohmann::json& body);

// The fault as Toxiproxy shows a toxic: every attribute of its type present.
// Only for a fault with `toxic` set.
[[nodiscard]] nlohmann::json http_toxic_to_json(const HttpFault& f);

// Toxiproxy's update of a toxic: "toxicity" and "attributes" (member by
// member) replace the current ones; name, type and stream stay.
[[nodiscard]] Result<HttpFault> http_toxic_merged(const HttpFault& current, const nlohmann::json& patch);

}  // namespace faultline
