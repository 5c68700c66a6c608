// SHA-256 of bytes as 64 lower-case hex digits: the record folder's checksums,
// the activity chain's hashes, the replay keys. Header-only: base itself does
// not link OpenSSL, its includers do.
#pragma once

#include <openssl/evp.h>

#include <string>
#include <string_view>

namespace faultline {

// "" only if OpenSSL fails (it does not for SHA-256 on memory).
[[nodiscard]] inline std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

}  // namespace faultline
