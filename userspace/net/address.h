// Addresses as the programs key them (fl_addr: 16 bytes, IPv4 mapped into
// ::ffff:0:0/96) and as operators write them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "base/result.h"
#include "faultline/abi.h"

namespace faultline {

// "10.0.0.1" for a mapped IPv4 address, "fd00::1" otherwise.
[[nodiscard]] std::string addr_text(const fl_addr& a);
// "10.0.0.1:80", "[fd00::1]:80"; without ":port" when port is 0.
[[nodiscard]] std::string endpoint_text(const fl_addr& a, uint16_t port);
// Whether a is an IPv4-mapped address.
[[nodiscard]] bool is_v4_mapped(const fl_addr& a);

struct Prefix {
  fl_addr addr{};    // network address, IPv4-mapped for IPv4
  uint8_t plen = 0;  // over the 128-bit mapped form (IPv4 /24 is 120)
  bool v4 = false;
  [[nodiscard]] std::string str() const;
  [[nodiscard]] bool exact() const { return plen == 128; }
  [[nodiscard]] fl_addr mask() const;
};

// "10.0.0.1", "10.0.0.0/8", "fd00::1", "fd00::/64". Host bits must be zero.
[[nodiscard]] Result<Prefix> parse_prefix(const std::string& s);

// A numeric "127.0.0.1:40123" or "[::1]:80" (a listener's bound address) in the
// kernel's form: the address (IPv4 v4-mapped) and the port.
[[nodiscard]] Result<std::pair<fl_addr, uint16_t>> parse_address_port(const std::string& text);

// Whether a covers b (a is shorter or equal, and b lies inside it).
[[nodiscard]] bool prefix_covers(const Prefix& a, const Prefix& b);

}  // namespace faultline
