// Frames laid out byte by byte in network order, the way the programs read them.
#include "selftests/bpf/packet_builder.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <stdexcept>

namespace faultline::bpftest {
namespace {

constexpr uint16_t kEthIp = 0x0800;
constexpr uint16_t kEthIpv6 = 0x86DD;
constexpr size_t kEthHlen = 14;
constexpr uint8_t kHopByHop = 0;
constexpr uint8_t kFragment = 44;

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v >> 8);
  b[off + 1] = static_cast<uint8_t>(v);
}

}  // namespace

std::vector<uint8_t> dns_wire_name(const std::string& qname) {
  std::vector<uint8_t> out;
  size_t start = 0;
  while (start <= qname.size()) {
    size_t dot = qname.find('.', start);
    if (dot == std::string::npos) dot = qname.size();
    std::string label = qname.substr(start, dot - start);
    if (!label.empty()) {
      out.push_back(static_cast<uint8_t>(label.size()));
      out.insert(out.end(), label.begin(), label.end());
    }
    start = dot + 1;
  }
  out.push_back(0);
  return out;
}

PacketBuilder::PacketBuilder(const std::string& src, const std::string& dst) : src_text_(src), dst_text_(dst) {
  in_addr a4{};
  if (inet_pton(AF_INET, src.c_str(), &a4) == 1) {
    std::memcpy(src_, &a4, 4);
    if (inet_pton(AF_INET, dst.c_str(), &a4) != 1) throw std::invalid_argument("mixed families: " + src + " " + dst);
    std::memcpy(dst_, &a4, 4);
    return;
  }
  v6_ = true;
  if (inet_pton(AF_INET6, src.c_str(), src_) != 1 || inet_pton(AF_INET6, dst.c_str(), dst_) != 1)
    throw std::invalid_argument("not two addresses of one family: " + src + " " + dst);
}

PacketBuilder& PacketBuilder::tcp(uint16_t sport, uint16_t dport, size_t option_bytes) {
  if (option_bytes % 4 != 0 || option_bytes > 40) throw std::invalid_argument("TCP options are 0-40 bytes, 4-aligned");
  l4_proto_ = IPPROTO_TCP;
  sport_ = sport;
  dport_ = dport;
  tcp_options_ = option_bytes;
  l4_header_ = true;
  return *this;
}

PacketBuilder& PacketBuilder::udp(uint16_t sport, uint16_t dport) {
  l4_proto_ = IPPROTO_UDP;
  sport_ = sport;
  dport_ = dport;
  l4_header_ = true;
  return *this;
}

PacketBuilder& PacketBuilder::icmp() {
  l4_proto_ = static_cast<uint8_t>(v6_ ? int{IPPROTO_ICMPV6} : int{IPPROTO_ICMP});
  l4_header_ = true;
  return *this;
}

PacketBuilder& PacketBuilder::proto(uint8_t ip_proto) {
  l4_proto_ = ip_proto;
  l4_header_ = false;
  return *this;
}

PacketBuilder& PacketBuilder::payload(std::vector<uint8_t> bytes) {
  payload_ = std::move(bytes);
  return *this;
}

PacketBuilder& PacketBuilder::payload_size(size_t n) {
  payload_.resize(n);
  for (size_t i = 0; i < n; ++i) payload_[i] = static_cast<uint8_t>(i);
  return *this;
}

PacketBuilder& PacketBuilder::dns(const std::string& qname, bool response) {
  std::vector<uint8_t> m(12, 0);
  m[0] = 0x12;  // id
  m[1] = 0x34;
  m[2] = response ? 0x81 : 0x01;  // QR, opcode 0, RD
  m[3] = response ? 0x80 : 0x00;  // RA on a response
  m[5] = 1;                       // QDCOUNT
  if (response) m[7] = 1;         // ANCOUNT (the answer itself is not needed)
  auto name = dns_wire_name(qname);
  m.insert(m.end(), name.begin(), name.end());
  const uint8_t tail[] = {0, 1, 0, 1};  // QTYPE A, QCLASS IN
  m.insert(m.end(), std::begin(tail), std::end(tail));
  payload_ = std::move(m);
  return *this;
}

PacketBuilder& PacketBuilder::ipv6_hop_by_hop() {
  if (!v6_) throw std::invalid_argument("a hop-by-hop header needs IPv6");
  hop_by_hop_ = true;
  return *this;
}

PacketBuilder& PacketBuilder::ipv6_fragment(uint16_t offset_8byte_units) {
  if (!v6_) throw std::invalid_argument("an IPv6 fragment header needs IPv6");
  v6_frag_ = true;
  v6_frag_off_ = offset_8byte_units & 0x1FFF;
  return *this;
}

PacketBuilder& PacketBuilder::ipv4_options(size_t bytes) {
  if (v6_ || bytes % 4 != 0 || bytes > 40) throw std::invalid_argument("IPv4 options are 0-40 bytes, 4-aligned");
  ip_options_ = bytes;
  return *this;
}

PacketBuilder& PacketBuilder::ipv4_fragment_offset(uint16_t offset_8byte_units) {
  if (v6_) throw std::invalid_argument("an IPv4 fragment offset needs IPv4");
  frag_off_ = offset_8byte_units & 0x1FFF;
  return *this;
}

PacketBuilder& PacketBuilder::ethertype(uint16_t type) {
  ethertype_ = type;
  return *this;
}

Packet PacketBuilder::build() const {
  Packet p;
  size_t l4_hlen = 0;
  if (l4_header_) {
    if (l4_proto_ == IPPROTO_TCP)
      l4_hlen = 20 + tcp_options_;
    else
      l4_hlen = 8;  // UDP, ICMP echo, ICMPv6 echo
  }
  size_t ext_len = (hop_by_hop_ ? 8 : 0) + (v6_frag_ ? 8 : 0);
  size_t l3_hlen = v6_ ? 40 + ext_len : 20 + ip_options_;
  size_t l4_len = l4_hlen + payload_.size();

  std::vector<uint8_t>& b = p.bytes;
  b.assign(kEthHlen + l3_hlen + l4_len, 0);
  // Ethernet: a unicast destination that is not this host's, so a clone that the
  // stack sees is dropped as PACKET_OTHERHOST instead of being delivered.
  const uint8_t dmac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
  const uint8_t smac[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  std::memcpy(b.data(), dmac, 6);
  std::memcpy(b.data() + 6, smac, 6);
  put16(b, 12, ethertype_ != 0 ? ethertype_ : (v6_ ? kEthIpv6 : kEthIp));

  p.l3_off = kEthHlen;
  uint8_t* ip = b.data() + p.l3_off;
  if (!v6_) {
    ip[0] = static_cast<uint8_t>(0x40 | (l3_hlen / 4));
    for (size_t i = 20; i < l3_hlen; ++i) ip[i] = 1;  // NOP options
    put16(b, p.l3_off + 2, static_cast<uint16_t>(l3_hlen + l4_len));
    put16(b, p.l3_off + 4, 0x4242);  // id
    put16(b, p.l3_off + 6, frag_off_);
    ip[8] = 64;
    ip[9] = l4_proto_;
    std::memcpy(ip + 12, src_, 4);
    std::memcpy(ip + 16, dst_, 4);
  } else {
    ip[0] = 0x60;
    put16(b, p.l3_off + 4, static_cast<uint16_t>(ext_len + l4_len));
    ip[7] = 64;
    std::memcpy(ip + 8, src_, 16);
    std::memcpy(ip + 24, dst_, 16);
    // The chain: fixed header -> [hop-by-hop] -> [fragment] -> L4.
    uint8_t* next_field = ip + 6;
    size_t off = 40;
    if (hop_by_hop_) {
      *next_field = kHopByHop;
      next_field = ip + off;  // the extension's own next-header byte
      ip[off + 1] = 0;        // length in 8-byte units, not counting the first 8
      ip[off + 2] = 1;        // a PadN option filling the rest
      ip[off + 3] = 4;
      off += 8;
    }
    if (v6_frag_) {
      *next_field = kFragment;
      next_field = ip + off;
      uint16_t fo = static_cast<uint16_t>(v6_frag_off_ << 3);  // offset, then 2 reserved bits and M
      ip[off + 2] = static_cast<uint8_t>(fo >> 8);
      ip[off + 3] = static_cast<uint8_t>(fo);
      ip[off + 7] = 0x42;  // identification
      off += 8;
    }
    *next_field = l4_proto_;
  }

  p.l4_off = p.l3_off + l3_hlen;
  p.payload_off = p.l4_off + l4_hlen;
  if (l4_header_) {
    uint8_t* l4 = b.data() + p.l4_off;
    switch (l4_proto_) {
      case IPPROTO_TCP:
        put16(b, p.l4_off, sport_);
        put16(b, p.l4_off + 2, dport_);
        put16(b, p.l4_off + 4, 0x0102);  // seq
        l4[12] = static_cast<uint8_t>((l4_hlen / 4) << 4);
        l4[13] = 0x18;  // PSH|ACK
        put16(b, p.l4_off + 14, 0xFFFF);
        for (size_t i = 20; i < l4_hlen; ++i) l4[i] = 1;  // NOP options
        break;
      case IPPROTO_UDP:
        put16(b, p.l4_off, sport_);
        put16(b, p.l4_off + 2, dport_);
        put16(b, p.l4_off + 4, static_cast<uint16_t>(l4_len));
        break;
      case IPPROTO_ICMP:
        l4[0] = 8;  // echo request
        put16(b, p.l4_off + 4, 0x77);
        break;
      case IPPROTO_ICMPV6:
        l4[0] = 128;  // echo request
        put16(b, p.l4_off + 4, 0x77);
        break;
      default:
        break;
    }
  }
  std::memcpy(b.data() + p.payload_off, payload_.data(), payload_.size());

  const char* name = "ip";
  switch (l4_proto_) {
    case IPPROTO_TCP:
      name = "tcp";
      break;
    case IPPROTO_UDP:
      name = "udp";
      break;
    case IPPROTO_ICMP:
      name = "icmp";
      break;
    case IPPROTO_ICMPV6:
      name = "icmpv6";
      break;
    default:
      break;
  }
  bool ports = l4_proto_ == IPPROTO_TCP || l4_proto_ == IPPROTO_UDP;
  auto ep = [&](const std::string& a, uint16_t port) {
    if (!ports) return a;
    return (v6_ ? "[" + a + "]" : a) + ":" + std::to_string(port);
  };
  p.describe = std::string(name) + " " + ep(src_text_, sport_) + " -> " + ep(dst_text_, dport_);
  if (!payload_.empty()) p.describe += " (" + std::to_string(payload_.size()) + " bytes payload)";
  return p;
}

}  // namespace faultline::bpftest
