// The guard's credentials file (--creds FILE): which header of which host's
// requests carries which secret, and where each secret comes from. Parsing
// only: no secret is read here (CredentialStore does that, at start and each TTL).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

// Where a secret comes from. literal: `ref` is the secret itself; env: the
// name of a variable of the guard's environment (removed from the command's);
// file: a file's path, read again each TTL.
enum class SecretKind : uint8_t { literal, env, file };

struct SecretSource {
  SecretKind kind = SecretKind::literal;
  std::string ref;
};

// One header set on the requests to one host: {"host", "header", "value",
// "secret"}. `value` holds ${SECRET} at least once, replaced by the secret.
struct HttpCredential {
  std::string where;             // "credentials[0]", for lines about it
  std::string host;              // lowercase name or address (IPv6 without brackets)
  std::optional<uint16_t> port;  // "host:port": that port only; else any
  std::string header;            // the field's name as written
  std::string value;             // the template
  SecretSource secret;
};

struct CredsFile {
  std::vector<HttpCredential> http;
};

// The file's text; `origin` starts every error ("creds.json: credentials[1].header:
// ..."), which names the field. Errors are bad input.
[[nodiscard]] Result<CredsFile> parse_creds_json(std::string_view text, const std::string& origin);
// The file at `path` (at most 1 MiB), parsed; errors start with the path.
[[nodiscard]] Result<CredsFile> read_creds_file(const std::string& path);

// The template with each ${SECRET} replaced by `secret`.
[[nodiscard]] std::string expand_secret(std::string_view value, std::string_view secret);

}  // namespace faultline
