#include "userspace/net/address.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace faultline {

bool is_v4_mapped(const fl_addr& a) {
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(kMapped, kMapped + 12, a.b);
}

std::string addr_text(const fl_addr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4_mapped(a))
    inet_ntop(AF_INET, a.b + 12, buf, sizeof(buf));
  else
    inet_ntop(AF_INET6, a.b, buf, sizeof(buf));
  return buf;
}

std::string endpoint_text(const fl_addr& a, uint16_t port) {
  std::string s = addr_text(a);
  if (s.find(':') != std::string::npos) s = "[" + s + "]";
  return port ? s + ":" + std::to_string(port) : s;
}

fl_addr Prefix::mask() const {
  fl_addr m{};
  for (int i = 0; i < 16; ++i) {
    int bits = std::clamp(plen - i * 8, 0, 8);
    m.b[i] = static_cast<uint8_t>(bits == 0 ? 0 : 0xFF << (8 - bits));
  }
  return m;
}

std::string Prefix::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v4) {
    inet_ntop(AF_INET, addr.b + 12, buf, sizeof(buf));
    return plen == 128 ? std::string(buf) : std::string(buf) + "/" + std::to_string(plen - 96);
  }
  inet_ntop(AF_INET6, addr.b, buf, sizeof(buf));
  return plen == 128 ? std::string(buf) : std::string(buf) + "/" + std::to_string(plen);
}

Result<Prefix> parse_prefix(const std::string& s) {
  Prefix p;
  std::string host = s;
  int len = -1;
  if (auto slash = s.find('/'); slash != std::string::npos) {
    host = s.substr(0, slash);
    std::string l = s.substr(slash + 1);
    if (l.empty() || l.size() > 3 || l.find_first_not_of("0123456789") != std::string::npos)
      return make_error(EINVAL, "'" + s + "' has a bad prefix length");
    len = std::stoi(l);
  }
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) {
    if (len > 32) return make_error(ERANGE, "'" + s + "': an IPv4 prefix is at most /32");
    p.v4 = true;
    p.addr.b[10] = p.addr.b[11] = 0xFF;
    std::memcpy(p.addr.b + 12, &a4, 4);
    p.plen = static_cast<uint8_t>(96 + (len < 0 ? 32 : len));
  } else if (inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    if (len > 128) return make_error(ERANGE, "'" + s + "': an IPv6 prefix is at most /128");
    std::memcpy(p.addr.b, &a6, 16);
    p.plen = static_cast<uint8_t>(len < 0 ? 128 : len);
  } else {
    return make_error(EINVAL, "'" + s + "' is not an IPv4 or IPv6 address or CIDR");
  }
  fl_addr m = p.mask();
  for (int i = 0; i < 16; ++i) {
    if ((p.addr.b[i] & ~m.b[i]) != 0)
      return make_error(EINVAL, "'" + s + "' has host bits set beyond the prefix length");
  }
  return p;
}

bool prefix_covers(const Prefix& a, const Prefix& b) {
  if (a.plen > b.plen) return false;
  fl_addr m = a.mask();
  for (int i = 0; i < 16; ++i) {
    if ((b.addr.b[i] & m.b[i]) != a.addr.b[i]) return false;
  }
  return true;
}

Result<std::pair<fl_addr, uint16_t>> parse_address_port(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return input_error(EINVAL, "\"" + text + "\" is not an address and port");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto prefix = parse_prefix(host);
  const std::string digits = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (!prefix || !prefix->exact() || digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() ||
      port > 65535)
    return input_error(EINVAL, "\"" + text + "\" is not an address and port");
  return std::pair{prefix->addr, uint16_t(port)};
}

}  // namespace faultline
