// scan_client_hello: real ClientHellos (OpenSSL's, through TlsSession::client)
// split at every byte and over several records, and a table of broken ones,
// each refused with the reason it names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "userspace/proxy/tls_client_hello.h"
#include "userspace/proxy/tls_session.h"

namespace {

using faultline::ClientHelloStatus;

faultline::ClientHelloScan scan_text(const std::string& s) {
  return faultline::scan_client_hello(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

// OpenSSL's first flight as a client of `host`: one record holding the ClientHello.
std::string openssl_client_hello(const std::string& host) {
  auto ctx = faultline::TlsClientContext::create();
  EXPECT_TRUE(ctx.ok()) << ctx.error().describe();
  auto s = faultline::TlsSession::client(*ctx, host);
  EXPECT_TRUE(s.ok()) << s.error().describe();
  return (*s)->take_ciphertext();
}

std::string u16(size_t v) { return {static_cast<char>(v >> 8), static_cast<char>(v & 0xff)}; }
std::string u24(size_t v) { return std::string(1, static_cast<char>(v >> 16)) + u16(v & 0xffff); }

std::string extension(uint16_t type, const std::string& data) { return u16(type) + u16(data.size()) + data; }
std::string sni_ext(const std::string& name) {
  const std::string entry = std::string(1, '\0') + u16(name.size()) + name;
  return extension(0, u16(entry.size()) + entry);
}
std::string alpn_ext(const std::vector<std::string>& protos) {
  std::string list;
  for (const auto& p : protos) list += std::string(1, static_cast<char>(p.size())) + p;
  return extension(16, u16(list.size()) + list);
}

// A ClientHello body built field by field, for the malformed table.
std::string hello_body(const std::string& extensions, bool with_extensions = true) {
  std::string b = "\x03\x03" + std::string(32, 'r');  // legacy_version, random
  b += std::string(1, '\0');                          // empty session id
  b += u16(2) + std::string("\x13\x01", 2);           // one cipher suite
  b += std::string("\x01\x00", 2);                    // null compression
  if (with_extensions) b += u16(extensions.size()) + extensions;
  return b;
}
std::string handshake(const std::string& body) { return "\x01" + u24(body.size()) + body; }
std::string record(const std::string& payload) { return "\x16\x03\x01" + u16(payload.size()) + payload; }
std::string one_record_hello(const std::string& extensions) { return record(handshake(hello_body(extensions))); }

TEST(ClientHello, OpenSslHelloGivesSniAndAlpn) {
  const std::string hello = openssl_client_hello("API.Example.test");
  auto r = scan_text(hello);
  ASSERT_EQ(r.status, ClientHelloStatus::kParsed) << r.error;
  EXPECT_EQ(r.hello.server_name, "api.example.test");
  EXPECT_EQ(r.hello.alpn, std::vector<std::string>{"http/1.1"});
  EXPECT_TRUE(r.hello.offers_tls13);
  EXPECT_EQ(r.hello.legacy_version, 0x0303);
  EXPECT_EQ(r.hello.record_bytes, hello.size());
}

TEST(ClientHello, EveryPrefixNeedsMoreAndTheWholeParses) {
  const std::string hello = openssl_client_hello("split.example.test");
  for (size_t n = 0; n < hello.size(); ++n) {
    auto r = scan_text(hello.substr(0, n));
    ASSERT_EQ(r.status, ClientHelloStatus::kNeedMore) << "prefix of " << n << " bytes: " << r.error;
    // wanted: each of the first three bytes (any may say "not TLS"), the end of
    // the record header, then the end of the record.
    const size_t want = n < 3 ? n + 1 : n < 5 ? 5 : hello.size();
    EXPECT_EQ(r.wanted, want) << "prefix of " << n << " bytes";
  }
  // Bytes after the hello (a client's next flight) do not change the answer.
  auto r = scan_text(hello + "\x17\x03\x03");
  ASSERT_EQ(r.status, ClientHelloStatus::kParsed) << r.error;
  EXPECT_EQ(r.hello.record_bytes, hello.size());
}

TEST(ClientHello, HelloFragmentedOverRecordsIsReassembled) {
  const std::string msg = handshake(hello_body(sni_ext("frag.example.test") + alpn_ext({"h2", "http/1.1"})));
  for (size_t cut : {size_t{1}, size_t{3}, size_t{4}, size_t{40}, msg.size() - 1}) {
    const std::string two = record(msg.substr(0, cut)) + record(msg.substr(cut));
    auto r = scan_text(two);
    ASSERT_EQ(r.status, ClientHelloStatus::kParsed) << "cut at " << cut << ": " << r.error;
    EXPECT_EQ(r.hello.server_name, "frag.example.test");
    EXPECT_EQ(r.hello.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
    EXPECT_EQ(r.hello.record_bytes, two.size());
    auto short_one = scan_text(two.substr(0, two.size() - 1));
    EXPECT_EQ(short_one.status, ClientHelloStatus::kNeedMore);
    EXPECT_EQ(short_one.wanted, two.size());
  }
}

TEST(ClientHello, IpLiteralAndNoSniAndNoExtensions) {
  auto ip = scan_text(one_record_hello(sni_ext("127.0.0.1")));
  ASSERT_EQ(ip.status, ClientHelloStatus::kParsed) << ip.error;
  EXPECT_EQ(ip.hello.server_name, "127.0.0.1");
  auto none = scan_text(one_record_hello(alpn_ext({"http/1.1"})));
  ASSERT_EQ(none.status, ClientHelloStatus::kParsed) << none.error;
  EXPECT_EQ(none.hello.server_name, "");
  auto bare = scan_text(record(handshake(hello_body("", false))));
  ASSERT_EQ(bare.status, ClientHelloStatus::kParsed) << bare.error;
  EXPECT_TRUE(bare.hello.alpn.empty());
}

TEST(ClientHello, OtherProtocolsAreNotTls) {
  for (const std::string& s :
       {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string("SSH-2.0-OpenSSH_9.2\r\n"),
        std::string("\x16\x02\x00", 3), std::string("\x16\x03\x07", 3), std::string("\x80\x2e\x01\x03\x01", 5)}) {
    auto r = scan_text(s);
    EXPECT_EQ(r.status, ClientHelloStatus::kNotTls) << "input " << s.size() << " bytes: " << r.error;
    EXPECT_FALSE(r.error.empty());
  }
  EXPECT_EQ(scan_text("\x16").status, ClientHelloStatus::kNeedMore);
  EXPECT_EQ(scan_text("").status, ClientHelloStatus::kNeedMore);
}

struct MalformedCase {
  const char* name;
  std::string bytes;
  const char* error_has;
};

TEST(ClientHello, MalformedHellosNameWhatIsWrong) {
  const std::string ok_msg = handshake(hello_body(sni_ext("a.test")));
  const std::vector<MalformedCase> cases = {
      {"empty record", "\x16\x03\x01" + u16(0), "is empty"},
      {"record too large", "\x16\x03\x01" + u16(16385), "at most 16384"},
      {"not a ClientHello", record("\x02" + u24(4) + "abcd"), "not ClientHello"},
      {"hello too large", record("\x01" + u24(1 << 20)), "at most"},
      {"alert between fragments", record(ok_msg.substr(0, 10)) + "\x15\x03\x03" + u16(2) + "\x02\x28", "not handshake"},
      {"truncated random", record(handshake("\x03\x03" + std::string(10, 'r'))), "random"},
      {"session id too long", record(handshake("\x03\x03" + std::string(32, 'r') + "\x21" + std::string(33, 's'))),
       "legacy_session_id of 33 bytes"},
      {"odd cipher suites",
       record(handshake("\x03\x03" + std::string(32, 'r') + std::string(1, '\0') + u16(3) + "abc" + "\x01\x00")),
       "cipher_suites of 3 bytes"},
      {"extensions overrun", record(handshake(hello_body("").substr(0, 41) + u16(100) + "xx")), "extensions"},
      {"duplicate extension", one_record_hello(sni_ext("a.test") + sni_ext("b.test")), "appears twice"},
      {"sni with a space", one_record_hello(sni_ext("a b.test")), "not allowed in a host name"},
      {"sni with NUL", one_record_hello(sni_ext(std::string("a\0b", 3))), "not allowed in a host name"},
      {"sni empty label", one_record_hello(sni_ext("a..test")), "empty label"},
      {"empty alpn name", one_record_hello(extension(16, u16(1) + std::string(1, '\0'))), "empty protocol name"},
      {"alpn overrun", one_record_hello(extension(16, u16(5) + "\x09http")), "ALPN"},
      {"bytes after hello", record(ok_msg + "zz"), "bytes after the ClientHello"},
      {"legacy version 2", record(handshake("\x02\x00" + hello_body(sni_ext("a.test")).substr(2))), "is not TLS"},
  };
  for (const auto& c : cases) {
    auto r = scan_text(c.bytes);
    EXPECT_EQ(r.status, ClientHelloStatus::kMalformed) << c.name << ": got " << client_hello_status_name(r.status);
    EXPECT_NE(r.error.find(c.error_has), std::string::npos) << c.name << ": error was '" << r.error << "'";
  }
}

}  // namespace
