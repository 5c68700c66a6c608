// The first bytes of a TLS connection read without decrypting: is it TLS, and
// which server name (SNI) and protocols (ALPN) does the client ask for. The
// input is untrusted: every length is checked, nothing is read past the bytes
// given, and the answer names what is wrong (selftests/fuzz/client_hello_fuzz.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace faultline {

// A ClientHello spread over more than this many bytes of records is refused
// (kMalformed): real ones are well under 2 KiB, a few KiB with post-quantum
// key shares. It bounds what a relay buffers before it decides.
inline constexpr size_t kMaxClientHelloBytes = 32 * 1024;

enum class ClientHelloStatus {
  kNeedMore,   // a prefix of a possible ClientHello: read more, scan again
  kNotTls,     // the first bytes are not a TLS handshake record (plain HTTP, SSH, ...)
  kParsed,     // a complete ClientHello; `hello` holds what it asks for
  kMalformed,  // a TLS handshake record whose contents break the format; `error` says how
};

struct ClientHello {
  std::string server_name;        // SNI host_name, lower-cased; empty when none was sent
  std::vector<std::string> alpn;  // the protocols offered, in the client's order
  uint16_t legacy_version = 0;    // 0x0303 for TLS 1.2 and 1.3 clients
  bool offers_tls13 = false;      // supported_versions lists 0x0304
  size_t record_bytes = 0;        // bytes of the records that carried the hello
};

struct ClientHelloScan {
  ClientHelloStatus status = ClientHelloStatus::kNeedMore;
  ClientHello hello;  // with kParsed
  std::string error;  // with kMalformed and kNotTls: what was wrong, and at which byte
  // With kNeedMore: scanning again before this many bytes (from the first) are
  // in cannot change the answer. A relay that waits for them scans once per
  // record, not once per read: a client trickling bytes costs no rescans.
  size_t wanted = 0;
};

// Scans everything read from the client so far (from its first byte). Stateless:
// a relay keeps the bytes (it forwards or decrypts them later anyway) and scans
// again once `wanted` bytes are in, until the status is not kNeedMore. Records split at any
// byte, and a hello fragmented over several records, are handled.
[[nodiscard]] ClientHelloScan scan_client_hello(std::span<const uint8_t> bytes);

[[nodiscard]] const char* client_hello_status_name(ClientHelloStatus s);

}  // namespace faultline
