// `faultctl guard --gateway` and faultd's --guard-gateway: one guard shared by agents on other hosts. Who
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

// `where` begins each error ("--gateway-token"; faultd's tokens file names
// the file and line instead).
[[nodiscard]] Result<GatewayToken> parse_gateway_token(const std::string& text,
                                                       const std::string& where = "--gateway-token");

// faultd's --guard-tokens FILE: one ID=TOKEN a line (blank lines and lines
// starting with # are skipped). A file that group or others may read, or that
// is not a regular file, is refused: the tokens are secrets. Errors name the
// flag (`flag`), the file and the line; at least one token.
[[nodiscard]] Result<std::vector<GatewayToken>> read_gateway_tokens_file(const std::string& file,
                                                                         const std::string& flag);

// The identity of a Proxy-Authorization value: "Basic base64(USER:TOKEN)"
// (USER is free: the token decides) or "Bearer TOKEN"; nothing when no token
// matches. Every token is compared, in constant time each, so the answer's
// timing tells no prefix.
[[nodiscard]] std::optional<std::string> gateway_identity(const std::vector<GatewayToken>& tokens,
                                                          std::string_view authorization);

}  // namespace faultline
