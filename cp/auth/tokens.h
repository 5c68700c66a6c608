// Bearer tokens: a visible prefix that says the kind ("flcp_api_..."), 32
// random bytes, and only their SHA-256 in the database.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace faultline::cp {

enum class TokenKind { Session, Api, Enrollment, Agent };

[[nodiscard]] const char* token_kind_name(TokenKind k);  // "session", "api", "enrollment", "agent"
[[nodiscard]] std::optional<TokenKind> token_kind_from_name(std::string_view name);
// The kind a token's prefix claims ("flcp_sess_" -> Session); none if it has no known prefix.
[[nodiscard]] std::optional<TokenKind> token_kind_of(std::string_view token);

struct MintedToken {
  std::string secret;  // shown once, to whoever asked for it
  std::string hash;    // what is stored
  std::string hint;    // the prefix and a few characters, for lists
};
[[nodiscard]] Result<MintedToken> mint_token(TokenKind kind);
[[nodiscard]] std::string token_hash(std::string_view secret);

}  // namespace faultline::cp
