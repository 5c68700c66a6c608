// SHA-256, random tokens and scrypt over OpenSSL 3 (EVP_Digest, RAND_bytes, EVP_KDF).
#include "cp/auth/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace faultline::cp {
namespace {

constexpr size_t kSaltBytes = 16;
constexpr size_t kKeyBytes = 32;
// A stored hash names its own cost; refuse costs no one set (a tampered row
// would otherwise make a login allocate gigabytes).
constexpr unsigned kMaxLogN = 20;

const char kB64Url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64url(const unsigned char* data, size_t n) {
  std::string out;
  out.reserve((n * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 2 < n; i += 3) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kB64Url[(v >> s) & 63];
  }
  if (n - i == 1) {
    const uint32_t v = uint32_t{data[i]} << 16;
    out += kB64Url[(v >> 18) & 63];
    out += kB64Url[(v >> 12) & 63];
  } else if (n - i == 2) {
    const uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8);
    out += kB64Url[(v >> 18) & 63];
    out += kB64Url[(v >> 12) & 63];
    out += kB64Url[(v >> 6) & 63];
  }
  return out;
}

std::optional<std::vector<unsigned char>> unbase64url(std::string_view s) {
  std::vector<unsigned char> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : s) {
    const char* at = std::strchr(kB64Url, ch);
    if (ch == '\0' || at == nullptr) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(at - kB64Url);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<unsigned char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

Result<std::vector<unsigned char>> scrypt(std::string_view password, const std::vector<unsigned char>& salt,
                                          ScryptParams p) {
  std::unique_ptr<EVP_KDF, void (*)(EVP_KDF*)> kdf(EVP_KDF_fetch(nullptr, "SCRYPT", nullptr), EVP_KDF_free);
  if (!kdf) return make_error(0, "OpenSSL has no SCRYPT KDF");
  std::unique_ptr<EVP_KDF_CTX, void (*)(EVP_KDF_CTX*)> ctx(EVP_KDF_CTX_new(kdf.get()), EVP_KDF_CTX_free);
  uint64_t n = uint64_t{1} << p.log_n;
  uint32_t r = p.r, par = p.p;
  // Room for the KDF's own working memory (128 * r * N) and a little more.
  uint64_t maxmem = 128ULL * r * n * (par + 1) + (1ULL << 20);
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PASSWORD, const_cast<char*>(password.data()), password.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<unsigned char*>(salt.data()), salt.size()),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_N, &n),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_R, &r),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_P, &par),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_MAXMEM, &maxmem),
      OSSL_PARAM_construct_end()};
  std::vector<unsigned char> key(kKeyBytes);
  if (!ctx || EVP_KDF_derive(ctx.get(), key.data(), key.size(), params) != 1)
    return make_error(0, "scrypt failed (out of memory?)");
  return key;
}

}  // namespace

Result<std::string> random_base64url(size_t n) {
  std::vector<unsigned char> buf(n);
  if (RAND_bytes(buf.data(), static_cast<int>(n)) != 1) return make_error(0, "RAND_bytes failed");
  return base64url(buf.data(), n);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
           data.size(), mac, &len) == nullptr)
    return "";
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

Result<std::string> hash_password(std::string_view password, ScryptParams params) {
  std::vector<unsigned char> salt(kSaltBytes);
  if (RAND_bytes(salt.data(), static_cast<int>(salt.size())) != 1) return make_error(0, "RAND_bytes failed");
  auto key = scrypt(password, salt, params);
  if (!key) return key.error();
  return "scrypt$" + std::to_string(params.log_n) + "$" + std::to_string(params.r) + "$" + std::to_string(params.p) +
         "$" + base64url(salt.data(), salt.size()) + "$" + base64url(key->data(), key->size());
}

bool verify_password(std::string_view password, const std::string& stored) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = stored.find('$', start)) != std::string::npos; start = at + 1)
    parts.push_back(stored.substr(start, at - start));
  parts.push_back(stored.substr(start));
  if (parts.size() != 6 || parts[0] != "scrypt") return false;
  ScryptParams p;
  try {
    p.log_n = static_cast<unsigned>(std::stoul(parts[1]));
    p.r = static_cast<unsigned>(std::stoul(parts[2]));
    p.p = static_cast<unsigned>(std::stoul(parts[3]));
  } catch (const std::exception&) {
    return false;
  }
  if (p.log_n < 1 || p.log_n > kMaxLogN || p.r < 1 || p.r > 32 || p.p < 1 || p.p > 16) return false;
  auto salt = unbase64url(parts[4]);
  auto want = unbase64url(parts[5]);
  if (!salt || !want) return false;
  auto got = scrypt(password, *salt, p);
  if (!got || got->size() != want->size()) return false;
  return CRYPTO_memcmp(got->data(), want->data(), got->size()) == 0;
}

}  // namespace faultline::cp
