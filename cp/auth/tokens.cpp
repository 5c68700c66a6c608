// Token prefixes, minting and hashing.
#include "cp/auth/tokens.h"

#include "cp/auth/crypto.h"

namespace faultline::cp {
namespace {

struct KindRow {
  TokenKind kind;
  const char* name;
  const char* prefix;
};
constexpr KindRow kKinds[] = {
    {TokenKind::Session, "session", "flcp_sess_"},
    {TokenKind::Api, "api", "flcp_api_"},
    {TokenKind::Enrollment, "enrollment", "flcp_enr_"},
    {TokenKind::Agent, "agent", "flcp_agent_"},
};
constexpr size_t kRandomBytes = 32;
constexpr size_t kHintChars = 6;  // of the random part: 36 bits, enough to tell tokens apart, useless to guess

}  // namespace

const char* token_kind_name(TokenKind k) {
  for (const auto& r : kKinds)
    if (r.kind == k) return r.name;
  return "unknown";
}

std::optional<TokenKind> token_kind_from_name(std::string_view name) {
  for (const auto& r : kKinds)
    if (name == r.name) return r.kind;
  return std::nullopt;
}

std::optional<TokenKind> token_kind_of(std::string_view token) {
  for (const auto& r : kKinds)
    if (token.rfind(r.prefix, 0) == 0 && token.size() > std::string_view(r.prefix).size()) return r.kind;
  return std::nullopt;
}

Result<MintedToken> mint_token(TokenKind kind) {
  auto random = random_base64url(kRandomBytes);
  if (!random) return random.error();
  const char* prefix = "";
  for (const auto& r : kKinds)
    if (r.kind == kind) prefix = r.prefix;
  MintedToken t;
  t.secret = prefix + *random;
  t.hash = token_hash(t.secret);
  t.hint = prefix + random->substr(0, kHintChars);
  return t;
}

std::string token_hash(std::string_view secret) { return sha256_hex(secret); }

}  // namespace faultline::cp
