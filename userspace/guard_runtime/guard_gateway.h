// `faultctl guard --gateway`: one guard shared by agents on other hosts. Who
// sends a request is the identity its Proxy-Authorization token maps to.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace faultline {

// --gateway-token ID=TOKEN, one per agent (or team).
struct GatewayToken {
  std::string identity;
  std::string token;
};

[[nodiscard]] Result<GatewayToken> parse_gateway_token(const std::string& text);

// The identity of a Proxy-Authorization value: "Basic base64(USER:TOKEN)"
// (USER is free: the token decides) or "Bearer TOKEN"; nothing when no token
// matches. Every token is compared, in constant time each, so the answer's
// timing tells no prefix.
[[nodiscard]] std::optional<std::string> gateway_identity(const std::vector<GatewayToken>& tokens,
                                                          std::string_view authorization);

}  // namespace faultline
