// The few primitives of the control plane's security, all from OpenSSL:
// SHA-256, random tokens, scrypt password hashes, constant-time compare.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/sha256.h"

namespace faultline::cp {

using faultline::sha256_hex;  // base/sha256.h
// n random bytes from the OpenSSL CSPRNG, as unpadded base64url.
[[nodiscard]] Result<std::string> random_base64url(size_t n);
[[nodiscard]] bool constant_time_equal(std::string_view a, std::string_view b);
// HMAC-SHA256 of data under key, as lower-case hex (webhook signatures).
[[nodiscard]] std::string hmac_sha256_hex(std::string_view key, std::string_view data);

// scrypt (RFC 7914) through EVP_KDF. N = 2^log_n; memory is 128 * r * N bytes
// (32 MiB at log_n 15, r 8). The result carries its parameters and salt:
// "scrypt$15$8$1$SALT$HASH" (base64url), so they can be raised later.
struct ScryptParams {
  unsigned log_n = 15;
  unsigned r = 8;
  unsigned p = 1;
};
[[nodiscard]] Result<std::string> hash_password(std::string_view password, ScryptParams params);
// False for a wrong password or a hash string we cannot read.
[[nodiscard]] bool verify_password(std::string_view password, const std::string& stored);

}  // namespace faultline::cp
