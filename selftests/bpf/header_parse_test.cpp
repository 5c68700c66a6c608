// Packets cut short inside their headers. The parser reads headers in place when
// they are in the linear area and through bpf_skb_load_bytes otherwise; either way
// a header the packet does not hold whole must count as missing exactly as when
// every read went through the helper:
//   - an IPv4 or IPv6 header, or an IPv6 extension header, cut short: the packet is
//     not parsed at all and no fault applies, not even one for every address;
//   - a TCP header cut before its data offset (byte 13), or a UDP header before its
//     ports (byte 4): the addresses count, the ports are unknown (0), so a fault
//     with a port range does not apply and one without does.
// BPF_PROG_TEST_RUN builds a linear skb, so these runs take the in-place reads up
// to the end of the packet and the helper for the header that is cut. It also
// refuses (EINVAL) a frame whose IPv4 or IPv6 header is cut, which can still
// reach tc ingress from a device; such a run is accepted as refused, and should a
// kernel run it, the packet must pass.
#include <netinet/in.h>

#include <cerrno>

#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

class HeaderParseTest : public NetfaultTest {
 protected:
  // The first len bytes of pkt (length fields keep claiming the whole packet).
  static Packet cut(const Packet& pkt, size_t len) {
    Packet c = pkt;
    c.bytes.resize(len);
    c.describe += ", cut to " + std::to_string(len) + " bytes";
    return c;
  }
  // A run the kernel may refuse (IP header cut); if it runs, nothing applies.
  void expect_refused_or_passed(int prog_fd, const Packet& pkt) const {
    RunResult r = run(prog_fd, pkt);
    if (r.err == -EINVAL) return;
    ASSERT_EQ(r.err, 0) << pkt.describe;
    EXPECT_EQ(r.verdict, Verdict::Pass) << pkt.describe;
  }
};

TEST_F(HeaderParseTest, Ipv4HeaderCutShortIsNotParsedAtAll) {
  FaultSpec every = make_spec(FaultKind::Partition);  // ::/0: every address of both families
  every.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  add(every);
  const Packet out = udp_to("203.0.113.9"), in = udp_from("203.0.113.9");
  ASSERT_EQ(out.l3_off, 14u);
  EXPECT_EQ(egress(out), Verdict::Redirect) << "the whole packet";
  for (size_t len : {14, 15, 20, 33}) {
    expect_refused_or_passed(egress_fd(), cut(out, len));
    expect_refused_or_passed(ingress_fd(), cut(in, len));
  }
  EXPECT_EQ(egress(cut(out, 34)), Verdict::Redirect) << "the IPv4 header whole, no UDP header: the address counts";
  EXPECT_EQ(ingress(cut(in, 34)), Verdict::Shot);
}

TEST_F(HeaderParseTest, TcpCutBeforeItsDataOffsetHasNoPorts) {
  FaultSpec https = make_spec(FaultKind::Partition, {"192.0.2.1"});
  https.ports = {443, 443};
  https.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  add(https);
  add(make_spec(FaultKind::Partition, {"192.0.2.2"}));  // no port range

  const Packet tcp = PacketBuilder(kLocal4, "192.0.2.1").tcp(40000, 443).build();
  EXPECT_EQ(egress(tcp), Verdict::Redirect) << "the whole segment";
  for (size_t l4 : {0, 2, 4, 12}) {
    Packet c = cut(tcp, tcp.l4_off + l4);
    EXPECT_EQ(egress(c), Verdict::Pass) << c.describe << ": " << l4 << " TCP header bytes, ports unknown";
  }
  EXPECT_EQ(egress(cut(tcp, tcp.l4_off + 13)), Verdict::Redirect) << "ports and the data offset byte are there";

  const Packet reply = PacketBuilder("192.0.2.1", kLocal4).tcp(443, 40000).build();
  EXPECT_EQ(ingress(cut(reply, reply.l4_off + 12)), Verdict::Pass) << "ingress: the source port is unknown too";
  EXPECT_EQ(ingress(cut(reply, reply.l4_off + 13)), Verdict::Shot);

  // Behind 12 bytes of IPv4 options the TCP header starts 12 bytes later.
  const Packet opts = PacketBuilder(kLocal4, "192.0.2.1").ipv4_options(12).tcp(40000, 443).build();
  ASSERT_EQ(opts.l4_off, 14u + 32u);
  EXPECT_EQ(egress(cut(opts, opts.l4_off + 12)), Verdict::Pass) << "cut before the data offset, behind options";
  EXPECT_EQ(egress(cut(opts, opts.l4_off + 13)), Verdict::Redirect);

  const Packet udp = PacketBuilder(kLocal4, "192.0.2.1").udp(40000, 443).build();
  EXPECT_EQ(egress(cut(udp, udp.l4_off + 3)), Verdict::Pass) << "UDP cut inside its ports";
  EXPECT_EQ(egress(cut(udp, udp.l4_off + 4)), Verdict::Redirect) << "UDP needs only its ports";

  const Packet plain = PacketBuilder(kLocal4, "192.0.2.2").tcp(40000, 443).build();
  EXPECT_EQ(egress(cut(plain, plain.l4_off)), Verdict::Redirect)
      << "a fault without ports takes a segment whose ports are unknown";
}

TEST_F(HeaderParseTest, Ipv6ExtensionHeaderCutShortIsNotParsedAtAll) {
  add(make_spec(FaultKind::Partition, {"2001:db8:a::1"}));
  FaultSpec https = make_spec(FaultKind::Partition, {"2001:db8:a::2"});
  https.ports = {443, 443};
  add(https);

  // IPv6 header 14..54, hop-by-hop 54..62, fragment 62..70, UDP from 70.
  const Packet any = PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_hop_by_hop().ipv6_fragment(0).udp(1, 443).build();
  ASSERT_EQ(any.l4_off, 70u);
  EXPECT_EQ(egress(any), Verdict::Redirect) << "the whole packet";
  // 53: the IPv6 header; 55: hop-by-hop's next-header and length bytes; 56 and 65:
  // the 4 bytes of the fragment header that are read (next header and offset).
  expect_refused_or_passed(egress_fd(), cut(any, 53));
  for (size_t len : {55, 56, 65}) EXPECT_EQ(egress(cut(any, len)), Verdict::Pass) << cut(any, len).describe;
  for (size_t len : {66, 70, 73})
    EXPECT_EQ(egress(cut(any, len)), Verdict::Redirect) << cut(any, len).describe << ": every IPv6 header read";

  const Packet port = PacketBuilder(kLocal6, "2001:db8:a::2").ipv6_hop_by_hop().ipv6_fragment(0).udp(1, 443).build();
  EXPECT_EQ(egress(cut(port, 73)), Verdict::Pass) << "UDP ports behind two extension headers, cut";
  EXPECT_EQ(egress(cut(port, 74)), Verdict::Redirect) << "UDP ports behind two extension headers";

  const Packet later = PacketBuilder(kLocal6, "2001:db8:a::1").ipv6_fragment(185).udp(40000, 443).build();
  EXPECT_EQ(egress(cut(later, 14 + 40 + 8)), Verdict::Redirect)
      << "a later fragment ends after its fragment header: nothing more is read";
  EXPECT_EQ(egress(cut(later, 14 + 40 + 3)), Verdict::Pass) << "a fragment header cut short";
}

}  // namespace
}  // namespace faultline::bpftest
