// ClientHello scanning (RFC 8446 4.1.2, RFC 6066 3, RFC 7301 3.1): records are
// reassembled into the handshake message first, then the message is read with a
// cursor that refuses to step past its end and keeps the first thing wrong.
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

// The first thing wrong with a ClientHello body; later reads see it and stop.
struct HelloError {
  std::string what;
  void fail(std::string why) {
    if (what.empty()) what = std::move(why);
  }
  [[nodiscard]] bool failed() const { return !what.empty(); }
};

// Reads big-endian fields from a byte range. A read past its end records the
// field in the shared HelloError and yields zeros and empty ranges, and done()
// turns true, so every loop over a cursor ends; the first error is the answer.
class HelloCursor {
 public:
  HelloCursor(std::span<const uint8_t> b, size_t base, HelloError& err) : b_(b), base_(base), err_(&err) {}

  [[nodiscard]] bool done() const { return err_->failed() || at_ == b_.size(); }
  [[nodiscard]] size_t offset() const { return base_ + at_; }

  uint32_t number(size_t width, const char* field) {
    if (!has(width, field)) return 0;
    uint32_t v = 0;
    for (size_t i = 0; i < width; ++i) v = (v << 8) | b_[at_ + i];
    at_ += width;
    return v;
  }
  std::span<const uint8_t> bytes(size_t n, const char* field) {
    if (!has(n, field)) return {};
    auto s = b_.subspan(at_, n);
    at_ += n;
    return s;
  }
  // A vector with a length prefix of `width` bytes: a cursor over its contents.
  HelloCursor vec(size_t width, const char* field) {
    const size_t n = number(width, field);
    const size_t base = offset();
    return HelloCursor(bytes(n, field), base, *err_);
  }

 private:
  bool has(size_t n, const char* field) {
    if (err_->failed()) return false;
    if (b_.size() - at_ >= n) return true;
    err_->fail(std::string(field) + " at byte " + std::to_string(offset()) + " needs " + std::to_string(n) +
               " bytes, " + std::to_string(b_.size() - at_) + " left");
    return false;
  }

  std::span<const uint8_t> b_;
  size_t base_;
  size_t at_ = 0;
  HelloError* err_;
};

std::string hello_hex8(uint32_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  return std::string("0x") + digits[(v >> 4) & 15] + digits[v & 15];
}

// RFC 6066: a DNS host name in ASCII, without a trailing dot. IP literals are not
// allowed there but some clients send them; they pass, as the leaf's SAN takes them.
std::string read_host_name(std::span<const uint8_t> name, HelloError& err) {
  if (name.empty() || name.size() > 255) {
    err.fail("server_name: host_name of " + std::to_string(name.size()) + " bytes (1 to 255)");
    return {};
  }
  std::string out;
  out.reserve(name.size());
  for (uint8_t c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_' || c == ':';
    if (!ok) {
      err.fail("server_name: byte " + hello_hex8(c) + " is not allowed in a host name");
      return {};
    }
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  if (out.front() == '.' || out.back() == '.' || out.find("..") != std::string::npos) {
    err.fail("server_name: '" + out + "' has an empty label");
    return {};
  }
  return out;
}

void read_server_name(HelloCursor ext, ClientHello& hello, HelloError& err) {
  HelloCursor list = ext.vec(2, "server_name_list");
  if (!ext.done()) err.fail("server_name: bytes after server_name_list");
  if (list.done() && !err.failed()) err.fail("server_name: empty server_name_list");
  while (!list.done()) {
    const uint32_t type = list.number(1, "server_name name_type");
    const size_t len = list.number(2, "server_name name length");
    auto name = list.bytes(len, "server_name name");
    if (err.failed()) return;
    if (type != 0) continue;  // only host_name (0) is defined; others are skipped
    if (!hello.server_name.empty()) {
      err.fail("server_name: more than one host_name");
      return;
    }
    hello.server_name = read_host_name(name, err);
  }
}

void read_alpn(HelloCursor ext, ClientHello& hello, HelloError& err) {
  HelloCursor list = ext.vec(2, "ALPN protocol_name_list");
  if (!ext.done()) err.fail("ALPN: bytes after protocol_name_list");
  if (list.done() && !err.failed()) err.fail("ALPN: empty protocol_name_list");
  while (!list.done()) {
    const size_t len = list.number(1, "ALPN protocol name length");
    if (len == 0 && !err.failed()) {
      err.fail("ALPN: empty protocol name");
      return;
    }
    auto name = list.bytes(len, "ALPN protocol name");
    if (err.failed()) return;
    hello.alpn.emplace_back(name.begin(), name.end());
  }
}

void read_supported_versions(HelloCursor ext, ClientHello& hello, HelloError& err) {
  HelloCursor list = ext.vec(1, "supported_versions list");
  if (!ext.done()) err.fail("supported_versions: bytes after the list");
  while (!list.done()) {
    if (list.number(2, "supported_versions version") == 0x0304) hello.offers_tls13 = true;
  }
}

ClientHello read_body(std::span<const uint8_t> body, HelloError& err) {
  ClientHello hello;
  HelloCursor c(body, 0, err);
  hello.legacy_version = static_cast<uint16_t>(c.number(2, "legacy_version"));
  if (!err.failed() && (hello.legacy_version >> 8) != 3)
    err.fail("legacy_version " + hello_hex8(hello.legacy_version >> 8) +
             hello_hex8(hello.legacy_version & 0xff).substr(2) + " is not TLS");
  c.bytes(32, "random");
  const size_t session_id = c.number(1, "legacy_session_id length");
  if (session_id > 32) err.fail("legacy_session_id of " + std::to_string(session_id) + " bytes (at most 32)");
  c.bytes(session_id, "legacy_session_id");
  const size_t suites = c.number(2, "cipher_suites length");
  if (!err.failed() && (suites == 0 || suites % 2 != 0))
    err.fail("cipher_suites of " + std::to_string(suites) + " bytes (a non-empty list of 2-byte suites)");
  c.bytes(suites, "cipher_suites");
  HelloCursor compression = c.vec(1, "legacy_compression_methods");
  if (compression.done() && !err.failed()) err.fail("legacy_compression_methods: empty");
  if (c.done()) return hello;  // a hello without extensions (TLS 1.0-era): no SNI, no ALPN
  HelloCursor exts = c.vec(2, "extensions");
  if (!c.done()) err.fail("bytes after the extensions, at byte " + std::to_string(c.offset()));
  std::set<uint32_t> seen;
  while (!exts.done()) {
    const uint32_t type = exts.number(2, "extension type");
    HelloCursor data = exts.vec(2, "extension data");
    if (err.failed()) break;
    if (!seen.insert(type).second)
      err.fail("extension " + std::to_string(type) + " appears twice");
    else if (type == kExtServerName)
      read_server_name(data, hello, err);
    else if (type == kExtAlpn)
      read_alpn(data, hello, err);
    else if (type == kExtSupportedVersions)
      read_supported_versions(data, hello, err);
  }
  return hello;
}

ClientHelloScan hello_result(ClientHelloStatus s, std::string error = {}) {
  ClientHelloScan r;
  r.status = s;
  r.error = std::move(error);
  return r;
}

// Nothing can change until `total` bytes are in: the end of the record (or
// record header) the scan stopped in.
ClientHelloScan need_bytes(size_t total) {
  ClientHelloScan r = hello_result(ClientHelloStatus::kNeedMore);
  r.wanted = total;
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
    // The first three bytes each may show it is not TLS: ask for them one by one.
    if (left == 0) return need_bytes(records == 0 ? 1 : pos + kRecordHeader);
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
    if (left < kRecordHeader) return need_bytes(records == 0 && left < 3 ? left + 1 : pos + kRecordHeader);
    const size_t len = (size_t{in[pos + 3]} << 8) | in[pos + 4];
    if (len == 0)
      return hello_result(ClientHelloStatus::kMalformed, "record " + std::to_string(records + 1) + " is empty");
    if (len > kMaxRecordPayload)
      return hello_result(ClientHelloStatus::kMalformed, "record " + std::to_string(records + 1) + " of " +
                                                             std::to_string(len) + " bytes (at most 16384)");
    if (pos + kRecordHeader + len > kMaxClientHelloBytes)
      return hello_result(ClientHelloStatus::kMalformed,
                          "the ClientHello runs past " + std::to_string(kMaxClientHelloBytes) + " bytes of records");
    if (left < kRecordHeader + len) return need_bytes(pos + kRecordHeader + len);
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
  HelloError err;
  ClientHelloScan r = hello_result(ClientHelloStatus::kParsed);
  r.hello = read_body(std::span<const uint8_t>(hs).subspan(4), err);
  if (err.failed()) return hello_result(ClientHelloStatus::kMalformed, "ClientHello: " + err.what);
  r.hello.record_bytes = pos;
  return r;
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
