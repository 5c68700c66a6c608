// Sign-up, login (rate-limited) and the tokens of a workspace.
#include <algorithm>
#include <cctype>

#include "cp/api/api_error.h"
#include "cp/api/control_plane.h"

namespace faultline::cp {
namespace {

const std::vector<FieldRule> kSignupFields = {
    {"email", JsonType::String, true}, {"password", JsonType::String, true}, {"workspace", JsonType::String, true}};
const std::vector<FieldRule> kLoginFields = {{"email", JsonType::String, true}, {"password", JsonType::String, true}};
const std::vector<FieldRule> kTokenFields = {{"kind", JsonType::String, true}, {"name", JsonType::String}};

constexpr size_t kMinPassword = 12;
constexpr size_t kMaxPassword = 1024;  // scrypt reads it all: no megabyte passwords

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::optional<ApiError> check_email(const std::string& email) {
  const auto at = email.find('@');
  if (email.size() < 3 || email.size() > 254 || at == std::string::npos || at == 0 || at + 1 == email.size() ||
      email.find_first_of(" \t\r\n") != std::string::npos)
    return ApiError{400, "email", "not an email address"};
  return std::nullopt;
}

// The host of "1.2.3.4:5678" or "[::1]:5678": one key per client address.
std::string address_key(const HttpPeer& peer) {
  const auto colon = peer.address.rfind(':');
  return colon == std::string::npos ? peer.address : peer.address.substr(0, colon);
}

HttpReply too_many(std::chrono::milliseconds wait, std::string_view what) {
  HttpReply r = api_error(429, std::string("too many login attempts ") + std::string(what) + ": try again later");
  r.headers.emplace_back("Retry-After", std::to_string((wait.count() + 999) / 1000));
  return r;
}

nlohmann::json token_json(const TokenRow& t) {
  nlohmann::json j{{"id", t.id}, {"kind", t.kind}, {"hint", t.hint}, {"name", t.name}, {"created_ms", t.created_ms}};
  j["revoked_ms"] = t.revoked_ms ? nlohmann::json(*t.revoked_ms) : nlohmann::json(nullptr);
  j["expires_ms"] = t.expires_ms ? nlohmann::json(*t.expires_ms) : nlohmann::json(nullptr);
  j["agent_id"] = t.agent_id ? nlohmann::json(*t.agent_id) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

HttpReply ControlPlane::signup(const HttpRequest& req) {
  const auto now = RateLimiter::Clock::now();
  const std::string addr = address_key(req.peer);
  if (auto wait = login_by_address_.blocked_for(addr, now); wait.count() > 0)
    return too_many(wait, "from this address");
  login_by_address_.record(addr, now);
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kSignupFields)) return e->reply();
  const std::string email = lower(j["email"].get<std::string>());
  const auto password = j["password"].get<std::string>();
  const auto workspace = j["workspace"].get<std::string>();
  if (auto e = check_email(email)) return e->reply();
  if (password.size() < kMinPassword || password.size() > kMaxPassword)
    return ApiError{400, "password",
                    "must be " + std::to_string(kMinPassword) + " to " + std::to_string(kMaxPassword) + " characters"}
        .reply();
  if (workspace.empty() || workspace.size() > 63 || workspace.front() == '-' ||
      workspace.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
    return ApiError{400, "workspace", "must be 1-63 of a-z, 0-9 and '-', not starting with '-'"}.reply();
  auto hash = hash_password(password, config_.scrypt);
  if (!hash) return api_error(500, hash.error().describe());
  SqlTransaction tx(store_.sql());
  // Workspace 0 is no workspace: its lock serialises sign-ups.
  if (auto begun = store_.begin(tx, 0); !begun) return storage_error(begun.error());
  auto user = store_.create_workspace(workspace, email, *hash, now_ms());
  if (!user) {
    if (user.error().err == kConflict) {
      const std::string& m = user.error().message;
      const std::string field = m.substr(0, m.find(':'));
      return api_error(409, m, field);
    }
    return api_error(500, "storage: " + user.error().describe());
  }
  auto minted = mint_token(TokenKind::Session);
  if (!minted) return api_error(500, minted.error().describe());
  auto row = store_.insert_token(user->workspace_id, "session", minted->hash, minted->hint, "signup", user->id,
                                 std::nullopt, now_ms(), now_ms() + config_.session_ttl.count());
  if (!row) return storage_error(row.error());
  if (auto a = audit_as(user->workspace_id, "user:" + std::to_string(user->id), "auth.signup",
                        "user:" + std::to_string(user->id), {{"email", email}, {"workspace", workspace}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return api_json(201, {{"token", minted->secret},
                        {"workspace_id", user->workspace_id},
                        {"workspace", workspace},
                        {"user_id", user->id}});
}

HttpReply ControlPlane::login(const HttpRequest& req) {
  const auto now = RateLimiter::Clock::now();
  const std::string addr = address_key(req.peer);
  if (auto wait = login_by_address_.blocked_for(addr, now); wait.count() > 0)
    return too_many(wait, "from this address");
  login_by_address_.record(addr, now);
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kLoginFields)) return e->reply();
  const std::string email = lower(j["email"].get<std::string>());
  const auto password = j["password"].get<std::string>();
  if (password.size() > kMaxPassword) return ApiError{400, "password", "is too long"}.reply();
  if (auto wait = login_failures_by_account_.blocked_for(email, now); wait.count() > 0)
    return too_many(wait, "for this account");
  auto user = store_.user_by_email(email);
  if (!user) return api_error(500, "storage: " + user.error().describe());
  // An unknown email costs the same scrypt as a known one: the answer's time
  // does not tell which emails have accounts.
  static const std::string kDecoy = *hash_password("decoy password", config_.scrypt);
  const bool good = verify_password(password, user->has_value() ? (*user)->password_hash : kDecoy) && user->has_value();
  if (!good) {
    login_failures_by_account_.record(email, now);
    // Logged on its own (there is no action to undo); a failure to log is counted.
    if (user->has_value())
      (void)audit_as((*user)->workspace_id, "anonymous", "auth.login_failed", "user:" + std::to_string((*user)->id),
                     {{"address", addr}});
    return api_error(401, "email or password is wrong");
  }
  login_failures_by_account_.clear(email);
  auto minted = mint_token(TokenKind::Session);
  if (!minted) return api_error(500, minted.error().describe());
  const User& u = **user;
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, u.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.insert_token(u.workspace_id, "session", minted->hash, minted->hint, "login", u.id, std::nullopt,
                                 now_ms(), now_ms() + config_.session_ttl.count());
  if (!row) return storage_error(row.error());
  if (auto a = audit_as(u.workspace_id, "user:" + std::to_string(u.id), "auth.login",
                        "token:" + std::to_string(row->id), {{"address", addr}});
      !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return api_json(200, {{"token", minted->secret}, {"workspace_id", u.workspace_id}, {"user_id", u.id}});
}

HttpReply ControlPlane::create_token(const HttpRequest& req, const Principal& p) {
  auto body = parse_body(req.body);
  if (auto* e = std::get_if<ApiError>(&body)) return e->reply();
  const auto& j = std::get<nlohmann::json>(body);
  if (auto e = check_fields(j, kTokenFields)) return e->reply();
  const auto kind_name = j["kind"].get<std::string>();
  const auto kind = token_kind_from_name(kind_name);
  // Session tokens come from login, agent tokens from registration.
  if (kind != TokenKind::Api && kind != TokenKind::Enrollment)
    return ApiError{400, "kind", "must be api or enrollment"}.reply();
  const std::string name = j.value("name", "");
  if (name.size() > 200) return ApiError{400, "name", "is over 200 characters"}.reply();
  auto minted = mint_token(*kind);
  if (!minted) return api_error(500, minted.error().describe());
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto row = store_.insert_token(p.workspace_id, kind_name, minted->hash, minted->hint, name, p.user_id, std::nullopt,
                                 now_ms());
  if (!row) return storage_error(row.error());
  if (auto a = audit(p, "token.create", "token:" + std::to_string(row->id), {{"kind", kind_name}, {"name", name}}); !a)
    return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  auto out = token_json(*row);
  out["token"] = minted->secret;
  return api_json(201, out);
}

HttpReply ControlPlane::list_tokens(const Principal& p) {
  auto rows = store_.tokens(p.workspace_id);
  if (!rows) return api_error(500, "storage: " + rows.error().describe());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : *rows) list.push_back(token_json(t));
  return api_json(200, {{"tokens", list}});
}

HttpReply ControlPlane::revoke_token(const PathParams& params, const Principal& p) {
  const auto id = path_id(params);
  if (!id) return api_error(404, "no such token");
  SqlTransaction tx(store_.sql());
  if (auto begun = store_.begin(tx, p.workspace_id); !begun) return storage_error(begun.error());
  auto done = store_.revoke_token(p.workspace_id, *id, now_ms());
  if (!done) return storage_error(done.error());
  if (!*done) return api_error(404, "no such token (or it was revoked already)");
  if (auto a = audit(p, "token.revoke", "token:" + std::to_string(*id)); !a) return storage_error(a.error());
  if (auto c = tx.commit(); !c) return storage_error(c.error());
  return api_json(200, {{"id", *id}, {"revoked", true}});
}

}  // namespace faultline::cp
