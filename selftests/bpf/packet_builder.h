// Crafted Ethernet frames for BPF_PROG_TEST_RUN: IPv4/IPv6, TCP/UDP/ICMP, DNS queries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace faultline::bpftest {

// A frame and where its layers start, so a test can tell header bytes from payload.
struct Packet {
  std::vector<uint8_t> bytes;
  size_t l3_off = 0;
  size_t l4_off = 0;
  size_t payload_off = 0;  // first byte after the L4 header (the DNS header for a query)
  std::string describe;    // "udp 10.0.0.2:40000 -> 10.0.0.1:53", for assert messages
};

// Lengths are right (IP total/payload length, UDP length, TCP data offset);
// checksums are left zero: the programs never verify them.
class PacketBuilder {
 public:
  // Source and destination as written ("10.0.0.1", "fd00::1"); the family follows.
  PacketBuilder(const std::string& src, const std::string& dst);

  PacketBuilder& tcp(uint16_t sport, uint16_t dport, size_t option_bytes = 0);
  PacketBuilder& udp(uint16_t sport, uint16_t dport);
  PacketBuilder& icmp();                   // echo request: ICMP on IPv4, ICMPv6 on IPv6
  PacketBuilder& proto(uint8_t ip_proto);  // a bare L4 protocol with no header of ours
  PacketBuilder& payload(std::vector<uint8_t> bytes);
  PacketBuilder& payload_size(size_t n);  // a counting pattern 0, 1, 2, ...
  // A DNS header plus one question (type A, class IN); qname as "www.example.com".
  PacketBuilder& dns(const std::string& qname, bool response = false);
  PacketBuilder& ipv6_hop_by_hop();  // an 8-byte hop-by-hop header before L4
  // An 8-byte fragment header before L4 (after hop-by-hop if both are set).
  PacketBuilder& ipv6_fragment(uint16_t offset_8byte_units);
  PacketBuilder& ipv4_fragment_offset(uint16_t offset_8byte_units);
  PacketBuilder& ipv4_options(size_t bytes);  // NOPs; ihl grows by bytes / 4
  PacketBuilder& ethertype(uint16_t type);    // overrides the IP ethertype (ARP, say)

  [[nodiscard]] Packet build() const;

 private:
  bool v6_ = false;
  uint8_t src_[16] = {};
  uint8_t dst_[16] = {};
  uint8_t l4_proto_ = 0;
  uint16_t sport_ = 0, dport_ = 0;
  size_t tcp_options_ = 0;
  bool l4_header_ = false;
  bool hop_by_hop_ = false;
  bool v6_frag_ = false;
  uint16_t v6_frag_off_ = 0;
  size_t ip_options_ = 0;
  uint16_t frag_off_ = 0;
  uint16_t ethertype_ = 0;
  std::vector<uint8_t> payload_;
  std::string src_text_, dst_text_;
};

// The DNS wire form of a question name: "www.example.com" -> 3www7example3com0.
[[nodiscard]] std::vector<uint8_t> dns_wire_name(const std::string& qname);

}  // namespace faultline::bpftest
