// libFuzzer target: the ClientHello scanner reads a client's first bytes,
// untrusted, before anything is decrypted (userspace/proxy/tls_client_hello.h).
#include <cstddef>
#include <cstdint>
#include <span>

#include "userspace/proxy/tls_client_hello.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using faultline::ClientHelloStatus;
  const std::span<const uint8_t> in(data, size);
  const auto r = faultline::scan_client_hello(in);
  if (r.status == ClientHelloStatus::kParsed) {
    // What it parsed lies within the input, and is all it needed: the same
    // records alone parse the same, and one byte less is only a prefix.
    if (r.hello.record_bytes == 0 || r.hello.record_bytes > size) __builtin_trap();
    const auto again = faultline::scan_client_hello(in.first(r.hello.record_bytes));
    if (again.status != ClientHelloStatus::kParsed || again.hello.server_name != r.hello.server_name ||
        again.hello.alpn != r.hello.alpn)
      __builtin_trap();
    if (faultline::scan_client_hello(in.first(r.hello.record_bytes - 1)).status != ClientHelloStatus::kNeedMore)
      __builtin_trap();
    for (char c : r.hello.server_name) {
      if (c >= 'A' && c <= 'Z') __builtin_trap();  // lower-cased
      if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) __builtin_trap();
    }
    for (const auto& p : r.hello.alpn)
      if (p.empty() || p.size() > 255) __builtin_trap();
  } else if (r.status == ClientHelloStatus::kNeedMore) {
    if (r.wanted <= size) __builtin_trap();  // more bytes are wanted than are there
  } else if (r.error.empty()) {
    __builtin_trap();  // every refusal says why
  }
  return 0;
}
