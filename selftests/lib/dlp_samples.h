// Secrets with valid structure made at test time (checksummed tokens,
// Luhn-valid cards, JWTs, PEM keys) and look-alikes that are not secrets:
// the DLP tests' positives and negatives (docs/detectors.md).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <random>
#include <string>
#include <vector>

#include "userspace/guard/dlp_validators.h"

namespace faultline::dlp_samples {

inline constexpr std::string_view kBase62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
inline constexpr std::string_view kB64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

inline std::string pick(std::mt19937_64& rng, std::string_view alphabet, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

inline std::string b64url_encode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kB64url[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kB64url[(acc << (6 - bits)) & 63];
  return out;
}

inline std::string aws_key(std::mt19937_64& rng) {
  return std::string(rng() % 2 ? "AKIA" : "ASIA") + pick(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16);
}
inline std::string anthropic_key(std::mt19937_64& rng) { return "sk-ant-api03-" + pick(rng, kB64url, 93) + "AA"; }
inline std::string openai_key(std::mt19937_64& rng) {
  return "sk-proj-" + pick(rng, kB64url, 74) + "T3BlbkFJ" + pick(rng, kB64url, 74);
}
inline std::string checksummed(std::mt19937_64& rng, std::string prefix) {
  const std::string body = pick(rng, kBase62, 30);
  return prefix + body + base62_crc32(body);
}
inline std::string github_token(std::mt19937_64& rng) {
  if (rng() % 4 == 0) return "github_pat_" + pick(rng, kBase62, 22) + "_" + pick(rng, kBase62, 59);
  static const char* kPrefixes[] = {"ghp_", "gho_", "ghu_", "ghs_", "ghr_"};
  return checksummed(rng, kPrefixes[rng() % 5]);
}
inline std::string npm_token(std::mt19937_64& rng) { return checksummed(rng, "npm_"); }
inline std::string slack_token(std::mt19937_64& rng) {
  return "xoxb-" + pick(rng, "0123456789", 12) + "-" + pick(rng, "0123456789", 13) + "-" + pick(rng, kBase62, 24);
}
inline std::string google_key(std::mt19937_64& rng) { return "AIza" + pick(rng, kB64url, 35); }
inline std::string jwt(std::mt19937_64& rng) {
  static const char* kAlgs[] = {"HS256", "RS256", "ES256"};
  const std::string header = std::string("{\"alg\":\"") + kAlgs[rng() % 3] + "\",\"typ\":\"JWT\"}";
  const std::string payload =
      "{\"sub\":\"" + pick(rng, kBase62, 12) + "\",\"iat\":" + std::to_string(1700000000 + rng() % 1000000) + "}";
  return b64url_encode(header) + "." + b64url_encode(payload) + "." + pick(rng, kB64url, 43);
}
// A real key, made by OpenSSL now (an EC key: quick).
inline std::string pem_key() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  EVP_PKEY_free(key);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}
inline std::string luhn_complete(std::string partial) {
  for (char d = '0'; d <= '9'; ++d)
    if (luhn_valid(partial + d)) return partial + d;
  return partial;
}
inline std::string card(std::mt19937_64& rng) {
  static const char* kIins[] = {"4", "51", "55", "2221", "37", "6011", "3530"};
  const std::string iin = kIins[rng() % 7];
  const size_t len = iin == "37" ? 15 : 16;
  std::string n = luhn_complete(iin + pick(rng, "0123456789", len - 1 - iin.size()));
  switch (rng() % 3) {
    case 0:
      return n;
    case 1:
      if (len == 16) return n.substr(0, 4) + " " + n.substr(4, 4) + " " + n.substr(8, 4) + " " + n.substr(12);
      return n.substr(0, 4) + " " + n.substr(4, 6) + " " + n.substr(10);
    default:
      if (len == 16) return n.substr(0, 4) + "-" + n.substr(4, 4) + "-" + n.substr(8, 4) + "-" + n.substr(12);
      return n.substr(0, 4) + "-" + n.substr(4, 6) + "-" + n.substr(10);
  }
}
inline std::string ssn(std::mt19937_64& rng) {
  int area;
  do area = 1 + static_cast<int>(rng() % 899);
  while (area == 666);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%03d-%02d-%04d", area, 1 + static_cast<int>(rng() % 99),
                1 + static_cast<int>(rng() % 9999));
  return buf;
}
inline std::string email(std::mt19937_64& rng) {
  static const char* kTlds[] = {"com", "org", "io", "de", "co.uk", "dev"};
  return pick(rng, "abcdefghijklmnopqrstuvwxyz", 5) + "." + pick(rng, "abcdefghijklmnopqrstuvwxyz", 6) + "@" +
         pick(rng, "abcdefghijklmnopqrstuvwxyz", 7) + "." + kTlds[rng() % 6];
}

inline std::string make(DlpType t, std::mt19937_64& rng) {
  switch (t) {
    case DlpType::aws_access_key:
      return aws_key(rng);
    case DlpType::anthropic_key:
      return anthropic_key(rng);
    case DlpType::openai_key:
      return openai_key(rng);
    case DlpType::github_token:
      return github_token(rng);
    case DlpType::npm_token:
      return npm_token(rng);
    case DlpType::slack_token:
      return slack_token(rng);
    case DlpType::google_api_key:
      return google_key(rng);
    case DlpType::jwt:
      return jwt(rng);
    case DlpType::private_key:
      return pem_key();
    case DlpType::credit_card:
      return card(rng);
    case DlpType::us_ssn:
      return ssn(rng);
    case DlpType::email:
      return email(rng);
  }
  return {};
}

}  // namespace faultline::dlp_samples
