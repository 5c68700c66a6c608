// ClientHello scanning (RFC 8446 4.1.2, RFC 6066 3, RFC 7301 3.1): records are
// reassembled into the handshake message first, then the message is read with a
// cursor that refuses to step past its end.
#include "userspace/proxy/tls_client_hello.h"

#include <set>
#include <string_view>

namespace faultline {
namespace {

constexpr uint8_t kRecordHandshake = 22;
constexpr uint8_t kHandshakeClientHello = 1;
constexpr size_t kRecordHeader = 5;
constexpr size_t kMaxRecordPayload = 16384;  // 2^14: a plaintext record's limit
constexpr uint16_t kExtServerName = 0;
constexpr uint16_t kExtAlpn = 16;
constexpr uint16_t kExtSupportedVersions = 43;

// A failed read: which field, at which offset of the ClientHello body.
struct HelloFormatError {
  std::string what;
};

// Reads big-endian fields from a byte range; any read past its end throws
// HelloFormatError naming the field (caught once, in scan_client_hello).
class HelloCursor {
 public:
  HelloCursor(std::span<const uint8_t> b, size_t base) : b_(b), base_(base) {}

  [[nodiscard]] bool done() const { return at_ == b_.size(); }
  [[nodiscard]] size_t offset() const { return base_ + at_; }

  uint32_t number(size_t width, const char* field) {
    need(width, field);
    uint32_t v = 0;
    for (size_t i = 0; i < width; ++i) v = (v << 8) | b_[at_ + i];
    at_ += width;
    return v;
  }
  std::span<const uint8_t> bytes(size_t n, const char* field) {
    need(n, field);
    auto s = b_.subspan(at_, n);
    at_ += n;
    return s;
  }
  // A vector with a length prefix of `width` bytes: a cursor over its contents.
  HelloCursor vec(size_t width, const char* field) {
    const size_t n = number(width, field);
    const size_t base = offset();
    return HelloCursor(bytes(n, field), base);
  }

 private:
  void need(size_t n, const char* field) {
    if (b_.size() - at_ < n)
      throw HelloFormatError{std::string(field) + " at byte " + std::to_string(offset()) + " needs " +
                             std::to_string(n) + " bytes, " + std::to_string(b_.size() - at_) + " left"};
  }

  std::span<const uint8_t> b_;
  size_t base_;
  size_t at_ = 0;
};

[[noreturn]] void hello_malformed(std::string what) { throw HelloFormatError{std::move(what)}; }

std::string hello_hex8(uint32_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  return std::string("0x") + digits[(v >> 4) & 15] + digits[v & 15];
}

// RFC 6066: a DNS host name in ASCII, without a trailing dot. IP literals are not
// allowed there but some clients send them; they pass, as the leaf's SAN takes them.
std::string read_host_name(std::span<const uint8_t> name) {
  if (name.empty()) hello_malformed("server_name: empty host_name");
  if (name.size() > 255)
    hello_malformed("server_name: host_name of " + std::to_string(name.size()) + " bytes (at most 255)");
  std::string out;
  out.reserve(name.size());
  for (uint8_t c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_' || c == ':';
    if (!ok) hello_malformed("server_name: byte " + hello_hex8(c) + " is not allowed in a host name");
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (out.front() == '.' || out.back() == '.' || out.find("..") != std::string::npos)
    hello_malformed("server_name: '" + out + "' has an empty label");
  return out;
}

void read_server_name(HelloCursor ext, ClientHello& hello) {
  HelloCursor list = ext.vec(2, "server_name_list");
  if (!ext.done()) hello_malformed("server_name: bytes after server_name_list");
  if (list.done()) hello_malformed("server_name: empty server_name_list");
  while (!list.done()) {
    const uint32_t type = list.number(1, "server_name name_type");
    const size_t len = list.number(2, "server_name name length");
    auto name = list.bytes(len, "server_name name");
    if (type != 0) continue;  // only host_name (0) is defined; others are skipped
    if (!hello.server_name.empty()) hello_malformed("server_name: more than one host_name");
    hello.server_name = read_host_name(name);
  }
}

void read_alpn(HelloCursor ext, ClientHello& hello) {
  HelloCursor list = ext.vec(2, "ALPN protocol_name_list");
  if (!ext.done()) hello_malformed("ALPN: bytes after protocol_name_list");
  if (list.done()) hello_malformed("ALPN: empty protocol_name_list");
  while (!list.done()) {
    const size_t len = list.number(1, "ALPN protocol name length");
    if (len == 0) hello_malformed("ALPN: empty protocol name");
    auto name = list.bytes(len, "ALPN protocol name");
    hello.alpn.emplace_back(name.begin(), name.end());
  }
}

void read_supported_versions(HelloCursor ext, ClientHello& hello) {
  HelloCursor list = ext.vec(1, "supported_versions list");
  if (!ext.done()) hello_malformed("supported_versions: bytes after the list");
  while (!list.done()) {
    if (list.number(2, "supported_versions version") == 0x0304) hello.offers_tls13 = true;
  }
}

ClientHello read_body(std::span<const uint8_t> body) {
  ClientHello hello;
  HelloCursor c(body, 0);
  hello.legacy_version = static_cast<uint16_t>(c.number(2, "legacy_version"));
  if ((hello.legacy_version >> 8) != 3)
    hello_malformed("legacy_version " + hello_hex8(hello.legacy_version >> 8) +
                    hello_hex8(hello.legacy_version & 0xff).substr(2) + " is not TLS");
  c.bytes(32, "random");
  const size_t session_id = c.number(1, "legacy_session_id length");
  if (session_id > 32) hello_malformed("legacy_session_id of " + std::to_string(session_id) + " bytes (at most 32)");
  c.bytes(session_id, "legacy_session_id");
  const size_t suites = c.number(2, "cipher_suites length");
  if (suites == 0 || suites % 2 != 0)
    hello_malformed("cipher_suites of " + std::to_string(suites) + " bytes (a non-empty list of 2-byte suites)");
  c.bytes(suites, "cipher_suites");
  HelloCursor compression = c.vec(1, "legacy_compression_methods");
  if (compression.done()) hello_malformed("legacy_compression_methods: empty");
  if (c.done()) return hello;  // a hello without extensions (TLS 1.0-era): no SNI, no ALPN
  HelloCursor exts = c.vec(2, "extensions");
  if (!c.done()) hello_malformed("bytes after the extensions, at byte " + std::to_string(c.offset()));
  std::set<uint32_t> seen;
  while (!exts.done()) {
    const uint32_t type = exts.number(2, "extension type");
    HelloCursor data = exts.vec(2, "extension data");
    if (!seen.insert(type).second) hello_malformed("extension " + std::to_string(type) + " appears twice");
    if (type == kExtServerName)
      read_server_name(data, hello);
    else if (type == kExtAlpn)
      read_alpn(data, hello);
    else if (type == kExtSupportedVersions)
      read_supported_versions(data, hello);
  }
  return hello;
}

ClientHelloScan hello_result(ClientHelloStatus s, std::string error = {}) {
  ClientHelloScan r;
  r.status = s;
  r.error = std::move(error);
  return r;
}

}  // namespace

ClientHelloScan scan_client_hello(std::span<const uint8_t> in) {
  // 1. Records into the handshake message.
  std::vector<uint8_t> hs;
  size_t pos = 0;
  size_t message_end = 0;  // 4 + the message length, once its header is in
  size_t records = 0;
  while (message_end == 0 || hs.size() < message_end) {
    const size_t left = in.size() - pos;
    if (left == 0) return hello_result(ClientHelloStatus::kNeedMore);
    if (in[pos] != kRecordHandshake) {
      if (records == 0)
        return hello_result(ClientHelloStatus::kNotTls,
                            "first byte " + hello_hex8(in[0]) + " is not a TLS handshake record (0x16)");
      return hello_result(ClientHelloStatus::kMalformed, "record " + std::to_string(records + 1) + " at byte " +
                                                             std::to_string(pos) + " has type " + hello_hex8(in[pos]) +
                                                             ", not handshake, before the ClientHello ended");
    }
    if (left >= 3 && (in[pos + 1] != 3 || in[pos + 2] > 4)) {
      const std::string v = hello_hex8(in[pos + 1]) + hello_hex8(in[pos + 2]).substr(2);
      if (records == 0)
        return hello_result(ClientHelloStatus::kNotTls, "record version " + v + " is not TLS (0x0300-0x0304)");
      return hello_result(ClientHelloStatus::kMalformed, "record " + std::to_string(records + 1) + " has version " + v);
    }
    if (left < kRecordHeader) return hello_result(ClientHelloStatus::kNeedMore);
    const size_t len = (size_t{in[pos + 3]} << 8) | in[pos + 4];
    if (len == 0)
      return hello_result(ClientHelloStatus::kMalformed, "record " + std::to_string(records + 1) + " is empty");
    if (len > kMaxRecordPayload)
      return hello_result(ClientHelloStatus::kMalformed, "record " + std::to_string(records + 1) + " of " +
                                                             std::to_string(len) + " bytes (at most 16384)");
    if (pos + kRecordHeader + len > kMaxClientHelloBytes)
      return hello_result(ClientHelloStatus::kMalformed,
                          "the ClientHello runs past " + std::to_string(kMaxClientHelloBytes) + " bytes of records");
    if (left < kRecordHeader + len) return hello_result(ClientHelloStatus::kNeedMore);
    hs.insert(hs.end(), in.begin() + pos + kRecordHeader, in.begin() + pos + kRecordHeader + len);
    pos += kRecordHeader + len;
    ++records;
    if (message_end == 0 && hs.size() >= 4) {
      if (hs[0] != kHandshakeClientHello)
        return hello_result(ClientHelloStatus::kMalformed,
                            "handshake message type " + std::to_string(hs[0]) + ", not ClientHello (1)");
      const size_t msg = (size_t{hs[1]} << 16) | (size_t{hs[2]} << 8) | hs[3];
      if (msg + 4 > kMaxClientHelloBytes)
        return hello_result(ClientHelloStatus::kMalformed, "ClientHello of " + std::to_string(msg) +
                                                               " bytes (at most " +
                                                               std::to_string(kMaxClientHelloBytes - 4) + ")");
      message_end = 4 + msg;
    }
  }
  // 2. The message. Bytes after it in the same record are another message,
  // which a client does not send before the server answers: refused.
  if (hs.size() != message_end)
    return hello_result(ClientHelloStatus::kMalformed,
                        std::to_string(hs.size() - message_end) + " bytes after the ClientHello in its last record");
  try {
    ClientHelloScan r = hello_result(ClientHelloStatus::kParsed);
    r.hello = read_body(std::span<const uint8_t>(hs).subspan(4));
    r.hello.record_bytes = pos;
    return r;
  } catch (const HelloFormatError& e) {
    return hello_result(ClientHelloStatus::kMalformed, "ClientHello: " + e.what);
  }
}

const char* client_hello_status_name(ClientHelloStatus s) {
  switch (s) {
    case ClientHelloStatus::kNeedMore:
      return "need-more";
    case ClientHelloStatus::kNotTls:
      return "not-tls";
    case ClientHelloStatus::kParsed:
      return "parsed";
    case ClientHelloStatus::kMalformed:
      return "malformed";
  }
  return "?";
}

}  // namespace faultline
