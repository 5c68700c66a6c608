// Every fault kind on real runs of fl_egress / fl_ingress: the verdict, what the
// packet and its metadata look like afterwards, and the counters each one bumps.
#include <arpa/inet.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <set>

#include "selftests/bpf/netfault_fixture.h"
#include "userspace/faults/packet/netfault_engine.h"

namespace faultline::bpftest {
namespace {

constexpr const char* kTarget = "192.0.2.1";
constexpr const char* kOther = "192.0.2.2";

class FaultKindTest : public NetfaultTest {};

struct BitDiff {
  size_t bits = 0;
  size_t first_byte = SIZE_MAX;
};

BitDiff bit_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  BitDiff d;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i] == b[i]) continue;
    d.bits += static_cast<size_t>(std::popcount(static_cast<unsigned>(a[i] ^ b[i])));
    d.first_byte = std::min(d.first_byte, i);
  }
  return d;
}

TEST_F(FaultKindTest, LossAtHundredPercentDropsEveryPacketAndAtZeroNone) {
  uint32_t all = add(make_spec(FaultKind::Loss, {kTarget}));
  FaultSpec none_spec = make_spec(FaultKind::Loss, {kOther});
  none_spec.percent = 0;
  uint32_t none = add(none_spec);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(egress(udp_to(kTarget)), egress_drop()) << "loss 100% to " << kTarget << ", run " << i;
    EXPECT_EQ(egress(udp_to(kOther)), Verdict::Pass) << "loss 0% to " << kOther << ", run " << i;
  }
  EXPECT_EQ(stats(all).matched, 20u);
  EXPECT_EQ(stats(all).dropped, 20u);
  EXPECT_EQ(stats(none).matched, 20u) << "a 0% loss fault still sees the packets";
  EXPECT_EQ(stats(none).dropped, 0u);
  EXPECT_EQ(reason(FL_DROP_LOSS), 20u);
}

TEST_F(FaultKindTest, IngressLossIsAShotDrop) {
  FaultSpec s = make_spec(FaultKind::Loss, {kTarget});
  s.dir_mask = FL_DIR_INGRESS;
  uint32_t slot = add(s);
  EXPECT_EQ(ingress(udp_from(kTarget)), Verdict::Shot) << "ingress loss from " << kTarget;
  EXPECT_EQ(stats(slot).dropped, 1u);
}

TEST_F(FaultKindTest, PartitionDropsBothDirectionsWithEachDirectionsVerdict) {
  FaultSpec s = make_spec(FaultKind::Partition, {kTarget});
  s.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  uint32_t slot = add(s);
  EXPECT_EQ(egress(udp_to(kTarget)), Verdict::Redirect)
      << "egress drop under FL_EGRESS_DROP_REDIRECT is a redirect to ifindex 0";
  EXPECT_EQ(ingress(udp_from(kTarget)), Verdict::Shot) << "ingress drop is TC_ACT_SHOT";
  EXPECT_EQ(egress(udp_to(kOther)), Verdict::Pass) << "a partition from " << kTarget << " leaves " << kOther;
  EXPECT_EQ(ingress(udp_from(kOther)), Verdict::Pass);
  EXPECT_EQ(stats(slot).matched, 2u);
  EXPECT_EQ(stats(slot).dropped, 2u);
  EXPECT_EQ(reason(FL_DROP_PARTITION), 2u);
}

TEST_F(FaultKindTest, StolenModeDropsEgressWithStolenAndIngressStillShot) {
  reload(FL_EGRESS_DROP_STOLEN);
  ASSERT_EQ(egress_drop(), Verdict::Stolen);
  FaultSpec s = make_spec(FaultKind::Partition, {kTarget});
  s.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  add(s);
  EXPECT_EQ(egress(udp_to(kTarget)), Verdict::Stolen) << "clsact mode drops egress silently with TC_ACT_STOLEN";
  EXPECT_EQ(ingress(udp_from(kTarget)), Verdict::Shot);
  EXPECT_EQ(egress(udp_to(kOther)), Verdict::Pass);
}

TEST_F(FaultKindTest, FlowdropBlackholesEveryListedAddressAndNoNeighbour) {
  FaultSpec s = make_spec(FaultKind::Flowdrop);
  std::vector<std::string> v4, v6;
  for (int i = 0; i < 1500; ++i) {
    // 198.18.0.0/15, every other address, so each has an unlisted neighbour.
    v4.push_back("198.18." + std::to_string(i / 100) + "." + std::to_string(2 * (i % 100) + 1));
  }
  for (int i = 0; i < 200; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "2001:db8:f::%x", 2 * i + 1);
    v6.emplace_back(buf);
  }
  for (const auto& a : v4) s.targets.push_back(prefix(a));
  for (const auto& a : v6) s.targets.push_back(prefix(a));
  uint32_t slot = add(s);
  ASSERT_EQ(count_keys<fl_addr>(maps().exact()), v4.size() + v6.size()) << "one fl_exact entry per listed address";

  size_t wrong = 0;
  for (const auto& a : v4) wrong += egress(udp_to(a)) != Verdict::Redirect;
  for (const auto& a : v6) wrong += egress(udp_to(a)) != Verdict::Redirect;
  EXPECT_EQ(wrong, 0u) << "listed addresses that were not dropped";

  const char* neighbours[] = {"198.18.0.2",    "198.18.0.0",      "198.18.14.200",  "198.18.15.1",
                              "2001:db8:f::2", "2001:db8:f::192", "2001:db8:f::1:1"};
  for (const char* n : neighbours) EXPECT_EQ(egress(udp_to(n)), Verdict::Pass) << "unlisted neighbour " << n;
  size_t total = v4.size() + v6.size();
  EXPECT_EQ(stats(slot).matched, total);
  EXPECT_EQ(stats(slot).dropped, total);
  EXPECT_EQ(reason(FL_DROP_FLOWDROP), total);
}

TEST_F(FaultKindTest, CorruptFlipsExactlyOnePayloadBitAndNoHeaderBit) {
  uint32_t slot = add(make_spec(FaultKind::Corrupt, {kTarget}));
  const Packet pkts[] = {
      PacketBuilder(kLocal4, kTarget).udp(40000, 80).payload_size(64).build(),
      PacketBuilder(kLocal4, kTarget).tcp(40000, 80, 12).payload_size(48).build(),  // options move the payload
      PacketBuilder(kLocal4, kTarget).icmp().payload_size(56).build(),
  };
  constexpr int kRuns = 200;
  for (const auto& pkt : pkts) {
    std::set<size_t> offsets;
    for (int i = 0; i < kRuns; ++i) {
      RunResult r = run(egress_fd(), pkt);
      ASSERT_EQ(r.err, 0);
      EXPECT_EQ(r.verdict, Verdict::Pass) << "corrupt lets the packet go";
      ASSERT_EQ(r.data_out.size(), pkt.bytes.size()) << "corrupt must not change the length";
      BitDiff d = bit_diff(pkt.bytes, r.data_out);
      ASSERT_EQ(d.bits, 1u) << pkt.describe << ": bits that differ between data_in and data_out";
      ASSERT_GE(d.first_byte, pkt.payload_off) << pkt.describe << ": the flipped bit is at byte " << d.first_byte
                                               << ", inside the headers (payload starts at " << pkt.payload_off << ")";
      offsets.insert(d.first_byte);
    }
    EXPECT_GT(offsets.size(), 10u) << pkt.describe << ": the flipped byte should move around the payload";
  }
  EXPECT_EQ(stats(slot).corrupted, 3u * kRuns);

  // Nothing after the headers: nothing to flip, and the headers stay intact.
  Packet empty = PacketBuilder(kLocal4, kTarget).udp(40000, 80).build();
  RunResult r = run(egress_fd(), empty);
  ASSERT_EQ(r.err, 0);
  EXPECT_EQ(bit_diff(empty.bytes, r.data_out).bits, 0u) << "a packet without payload is left alone";
  EXPECT_EQ(stats(slot).corrupted, 3u * kRuns) << "and not counted as corrupted";
  EXPECT_EQ(stats(slot).matched, 3u * kRuns + 1);
}

// bpf_clone_redirect works inside BPF_PROG_TEST_RUN: the clone is handed to the
// device of the run (loopback), which drops it (the frame is not addressed to it);
// the helper returns 0, so the duplicated counter is what a test can observe.
TEST_F(FaultKindTest, DuplicateClonesEachPacketOnceInBothDirections) {
  FaultSpec s = make_spec(FaultKind::Duplicate, {kTarget});
  s.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;
  uint32_t slot = add(s);
  Packet out = udp_to(kTarget), in = udp_from(kTarget);
  for (int i = 0; i < 5; ++i) {
    RunResult r = run(egress_fd(), out);
    ASSERT_EQ(r.err, 0);
    EXPECT_EQ(r.verdict, Verdict::Pass) << "the original goes on";
    EXPECT_EQ(r.data_out, out.bytes) << "the original is unchanged";
    EXPECT_EQ(stats(slot).duplicated, static_cast<uint64_t>(2 * i + 1)) << "after egress run " << i;
    EXPECT_EQ(ingress(in), Verdict::Pass);
    EXPECT_EQ(stats(slot).duplicated, static_cast<uint64_t>(2 * i + 2)) << "after ingress run " << i;
  }
  EXPECT_EQ(stats(slot).matched, 10u);
  EXPECT_EQ(stats(slot).dropped, 0u);
}

TEST_F(FaultKindTest, DuplicateLetsItsOwnMarkedCopyPassAndClearsTheMark) {
  uint32_t slot = add(make_spec(FaultKind::Duplicate, {kTarget}));
  __sk_buff ctx{};
  ctx.mark = FL_DEFAULT_DUP_MARK | 0x5;
  RunResult r = run(egress_fd(), udp_to(kTarget), &ctx);
  ASSERT_EQ(r.err, 0);
  EXPECT_EQ(r.verdict, Verdict::Pass);
  EXPECT_EQ(r.ctx_out.mark, 0x5u) << "the dup bit is cleared, the other mark bits are kept";
  EXPECT_EQ(stats(slot).matched, 0u) << "our own copy is not a new packet for the fault";
  EXPECT_EQ(stats(slot).duplicated, 0u) << "a copy is never duplicated again";

  FaultSpec zero = make_spec(FaultKind::Duplicate, {kOther});
  zero.percent = 0;
  uint32_t z = add(zero);
  EXPECT_EQ(egress(udp_to(kOther)), Verdict::Pass);
  EXPECT_EQ(stats(z).matched, 1u);
  EXPECT_EQ(stats(z).duplicated, 0u) << "0% duplicates nothing";
}

TEST_F(FaultKindTest, DnsDropsListedNamesAndTheirSubdomainsCaseInsensitively) {
  FaultSpec s = make_spec(FaultKind::Dns);
  s.domains = {"example.com", "blocked.test"};
  uint32_t slot = add(s);

  const char* dropped[] = {"example.com", "www.example.com", "WWW.Example.COM", "a.b.c.d.blocked.test", "BLOCKED.TEST"};
  for (const char* q : dropped) EXPECT_EQ(egress(dns_query(q)), Verdict::Redirect) << "query for " << q;
  EXPECT_EQ(egress(dns_query("www.example.com", 53, "2001:db8:53::1")), Verdict::Redirect) << "query over IPv6";

  const char* passed[] = {"example.org", "badexample.com", "example.com.evil.net", "com",
                          "xample.com",  "test",           "notblocked.test"};
  for (const char* q : passed) EXPECT_EQ(egress(dns_query(q)), Verdict::Pass) << "query for " << q;

  Packet response = PacketBuilder(kLocal4, "192.0.2.53").udp(40000, 53).dns("example.com", true).build();
  EXPECT_EQ(egress(response), Verdict::Pass) << "a DNS response (QR=1) is not a query";
  EXPECT_EQ(egress(dns_query("example.com", 5353)), Verdict::Pass) << "a query to port 5353 is not DNS here";
  Packet tcp = PacketBuilder(kLocal4, "192.0.2.53").tcp(40000, 53).dns("example.com").build();
  EXPECT_EQ(egress(tcp), Verdict::Pass) << "DNS over TCP is not parsed";

  uint64_t n = std::size(dropped) + 1;
  EXPECT_EQ(stats(slot).matched, n);
  EXPECT_EQ(stats(slot).dropped, n);
  EXPECT_EQ(reason(FL_DROP_DNS), n);
}

TEST_F(FaultKindTest, DnsHandlesTheLongestNameAndRefusesMalformedOnes) {
  // 253 characters, the most a name may have: 63 + 63 + 63 + 61 plus three dots.
  const std::string l63(63, 'a'), l61(61, 'b');
  const std::string listed = l63 + "." + l61;  // 125 characters
  const std::string longest = l63 + "." + l63 + "." + listed;
  ASSERT_EQ(longest.size(), 253u);
  FaultSpec s = make_spec(FaultKind::Dns);
  s.domains = {listed};
  uint32_t slot = add(s);
  EXPECT_EQ(egress(dns_query(longest)), Verdict::Redirect) << "a 253-character subdomain of a listed name";
  EXPECT_EQ(egress(dns_query(listed)), Verdict::Redirect) << "the listed 125-character name itself";

  // A name cut off before its terminating zero: not a name the parser can trust.
  Packet cut = dns_query("www." + listed);
  cut.bytes.resize(cut.bytes.size() - 5);  // drop the root label and QTYPE/QCLASS
  EXPECT_EQ(egress(cut), Verdict::Pass) << "a truncated question";

  // A compression pointer where a label should be.
  Packet ptr = PacketBuilder(kLocal4, "192.0.2.53")
                   .udp(40000, 53)
                   .payload({0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 0x0C, 0, 1, 0, 1})
                   .build();
  EXPECT_EQ(egress(ptr), Verdict::Pass) << "a compression pointer in a question";
  EXPECT_EQ(stats(slot).dropped, 2u);
}

TEST_F(FaultKindTest, DnsWithAResolverTargetDropsOnlyQueriesToThatResolver) {
  FaultSpec s = make_spec(FaultKind::Dns, {"192.0.2.53"});
  s.domains = {"example.com"};
  add(s);
  EXPECT_EQ(egress(dns_query("www.example.com", 53, "192.0.2.53")), Verdict::Redirect);
  EXPECT_EQ(egress(dns_query("www.example.com", 53, "192.0.2.54")), Verdict::Pass)
      << "the same name through another resolver";
}

// The program does one longest-prefix lookup per query and each name leads to one
// fault, so a nested name of a second fault would hide the first one whenever the
// second does not apply (here: it is ingress-only). FaultTable refuses the overlap.
TEST_F(FaultKindTest, DnsRefusesANameNestedInAnotherFaultsName) {
  FaultSpec cover = make_spec(FaultKind::Dns);
  cover.domains = {"example.com"};
  uint32_t a = add(cover);

  FaultSpec inner = make_spec(FaultKind::Dns);
  inner.domains = {"www.example.com"};
  inner.dir_mask = FL_DIR_INGRESS;
  CompiledFault c = compile_fault(inner, netns_ino(), 0, 0);
  c.entry.expires_ns = boottime_ns() + 30'000'000'000ULL;
  auto slot = table().allocate_slot();
  ASSERT_TRUE(slot.ok());
  Status st = table().add(*slot, c, fl_meta{});
  ASSERT_FALSE(st.ok()) << "www.example.com inside another fault's example.com must be refused";
  EXPECT_EQ(st.error().err, EEXIST) << st.error().describe();
  EXPECT_FALSE(table().exists(*slot)) << "a refused fault leaves no slot behind";

  FaultSpec above = make_spec(FaultKind::Dns);
  above.domains = {"com"};
  CompiledFault c2 = compile_fault(above, netns_ino(), 0, 0);
  c2.entry.expires_ns = c.entry.expires_ns;
  EXPECT_FALSE(table().add(*slot, c2, fl_meta{}).ok()) << "com above another fault's example.com";

  FaultSpec beside = make_spec(FaultKind::Dns);
  beside.domains = {"badexample.com", "example.org"};
  uint32_t b = add(beside);
  EXPECT_NE(b, UINT32_MAX) << "names that merely share letters do not overlap";
  EXPECT_EQ(count_keys<fl_dns_key>(maps().dns()), 3u);

  EXPECT_EQ(egress(dns_query("www.example.com")), Verdict::Redirect) << "example.com still covers www.example.com";
  EXPECT_EQ(stats(a).dropped, 1u);
  EXPECT_EQ(egress(dns_query("badexample.com")), Verdict::Redirect);
  EXPECT_EQ(stats(b).dropped, 1u);

  FaultSpec own = make_spec(FaultKind::Dns);
  own.domains = {"test", "www.test"};  // nesting inside one fault hides nothing
  EXPECT_NE(add(own), UINT32_MAX);
}

TEST_F(FaultKindTest, IngressDnsDropsQueriesArrivingAtALocalServer) {
  FaultSpec s = make_spec(FaultKind::Dns);
  s.domains = {"example.com"};
  s.dir_mask = FL_DIR_INGRESS;
  add(s);
  Packet query_in = PacketBuilder("192.0.2.9", kLocal4).udp(40000, 53).dns("mail.example.com").build();
  EXPECT_EQ(ingress(query_in), Verdict::Shot) << "a query to our port 53";
  EXPECT_EQ(egress(dns_query("mail.example.com")), Verdict::Pass) << "an ingress-only dns fault leaves egress";
}

TEST_F(FaultKindTest, LatencyPushesTheDepartureTimeByTheDelay) {
  FaultSpec s = make_spec(FaultKind::Latency, {kTarget});
  s.delay_ns = 5'000'000;
  uint32_t slot = add(s);

  __sk_buff ctx{};  // tstamp 0: the delay counts from now (CLOCK_MONOTONIC)
  uint64_t before = monotonic_ns();
  RunResult r = run(egress_fd(), udp_to(kTarget), &ctx);
  uint64_t after = monotonic_ns();
  ASSERT_EQ(r.err, 0);
  EXPECT_EQ(r.verdict, Verdict::Pass);
  EXPECT_GE(r.ctx_out.tstamp, before + s.delay_ns) << "tstamp must be at least now + 5ms";
  EXPECT_LE(r.ctx_out.tstamp, after + s.delay_ns) << "tstamp must be at most now + 5ms";

  // A departure time already in the future is the base the delay adds to.
  ctx.tstamp = monotonic_ns() + 1'000'000'000ULL;
  r = run(egress_fd(), udp_to(kTarget), &ctx);
  ASSERT_EQ(r.err, 0);
  EXPECT_EQ(r.ctx_out.tstamp, ctx.tstamp + s.delay_ns);
  EXPECT_EQ(stats(slot).delayed, 2u);

  // Someone else's packet keeps its timestamp.
  ctx.tstamp = 0;
  r = run(egress_fd(), udp_to(kOther), &ctx);
  EXPECT_EQ(r.ctx_out.tstamp, 0u) << "no fault for " << kOther;
}

TEST_F(FaultKindTest, LatencyJitterStaysWithinBoundsAndSpreadsOverThem) {
  FaultSpec s = make_spec(FaultKind::Latency, {kTarget});
  s.delay_ns = 10'000'000;
  s.jitter_ns = 4'000'000;
  s.dist = FL_DIST_UNIFORM;
  add(s);
  __sk_buff ctx{};
  ctx.tstamp = monotonic_ns() + 5'000'000'000ULL;  // a fixed base: the added delay is exact
  Packet pkt = udp_to(kTarget);
  constexpr int kRuns = 4000;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  double sum = 0;
  for (int i = 0; i < kRuns; ++i) {
    RunResult r = run(egress_fd(), pkt, &ctx);
    ASSERT_EQ(r.err, 0);
    int64_t d = static_cast<int64_t>(r.ctx_out.tstamp - ctx.tstamp);
    ASSERT_GE(d, 6'000'000) << "delay - jitter is the least a uniform jitter adds";
    ASSERT_LE(d, 14'000'000) << "delay + jitter is the most";
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    sum += static_cast<double>(d);
  }
  EXPECT_LT(lo, 6'500'000) << "the low end of the range is reached";
  EXPECT_GT(hi, 13'500'000) << "the high end of the range is reached";
  EXPECT_NEAR(sum / kRuns, 10'000'000.0, 200'000.0) << "uniform jitter has mean 0";
}

TEST_F(FaultKindTest, LatencyWithNormalJitterHasTheDelayAsMeanAndTheJitterAsSigma) {
  FaultSpec s = make_spec(FaultKind::Latency, {kTarget});
  s.delay_ns = 4'000'000;
  s.jitter_ns = 1'000'000;  // the table ends near 3.5 sigma: every sample is a real delay
  s.dist = FL_DIST_NORMAL;
  uint32_t slot = add(s);
  __sk_buff ctx{};
  ctx.tstamp = monotonic_ns() + 5'000'000'000ULL;
  Packet pkt = udp_to(kTarget);
  constexpr int kRuns = 4000;
  double sum = 0, sq = 0;
  for (int i = 0; i < kRuns; ++i) {
    RunResult r = run(egress_fd(), pkt, &ctx);
    ASSERT_EQ(r.err, 0);
    ASSERT_GT(r.ctx_out.tstamp, ctx.tstamp) << "run " << i << ": every packet gets a positive delay";
    double d = static_cast<double>(r.ctx_out.tstamp - ctx.tstamp);
    sum += d;
    sq += d * d;
  }
  double mean = sum / kRuns, sd = std::sqrt(sq / kRuns - mean * mean);
  EXPECT_NEAR(mean, 4'000'000.0, 80'000.0) << "mean delay";
  EXPECT_NEAR(sd, 1'000'000.0, 100'000.0) << "standard deviation of the delay";
  EXPECT_EQ(stats(slot).delayed, static_cast<uint64_t>(kRuns));
}

TEST_F(FaultKindTest, LatencyJitterBelowZeroLeavesThePacketUndelayed) {
  FaultSpec s = make_spec(FaultKind::Latency, {kTarget});
  s.delay_ns = 1'000'000;
  s.jitter_ns = 5'000'000;  // uniform: delay + [-5, 5] ms, at or below 0 for 40% of packets
  s.dist = FL_DIST_UNIFORM;
  uint32_t slot = add(s);
  __sk_buff ctx{};
  ctx.tstamp = monotonic_ns() + 5'000'000'000ULL;
  Packet pkt = udp_to(kTarget);
  constexpr int kRuns = 4000;
  int unchanged = 0;
  for (int i = 0; i < kRuns; ++i) {
    RunResult r = run(egress_fd(), pkt, &ctx);
    ASSERT_EQ(r.err, 0);
    ASSERT_GE(r.ctx_out.tstamp, ctx.tstamp) << "run " << i << ": a delay never moves a packet earlier";
    unchanged += r.ctx_out.tstamp == ctx.tstamp;
  }
  EXPECT_NEAR(unchanged, kRuns * 0.4, kRuns * 0.05) << "packets whose sampled delay was <= 0";
  EXPECT_EQ(stats(slot).delayed, static_cast<uint64_t>(kRuns - unchanged))
      << "only packets that got a delay count as delayed";
  EXPECT_EQ(stats(slot).matched, static_cast<uint64_t>(kRuns));
}

TEST_F(FaultKindTest, LatencyNeverTouchesIngress) {
  FaultSpec s = make_spec(FaultKind::Latency, {kTarget});
  s.delay_ns = 5'000'000;
  s.dir_mask = FL_DIR_EGRESS | FL_DIR_INGRESS;  // what validate() refuses, forced here
  uint32_t slot = add(s);
  __sk_buff ctx{};
  RunResult r = run(ingress_fd(), udp_from(kTarget), &ctx);
  ASSERT_EQ(r.err, 0);
  EXPECT_EQ(r.verdict, Verdict::Pass);
  EXPECT_EQ(r.ctx_out.tstamp, 0u) << "EDT only means something on egress";
  EXPECT_EQ(stats(slot).delayed, 0u);
}

TEST_F(FaultKindTest, BandwidthAdvancesTheEdtClockByLengthOverRate) {
  FaultSpec s = make_spec(FaultKind::Bandwidth, {kTarget});
  s.rate_bps = 100'000;  // 100 kbit/s: a 142-byte frame costs 11.36 ms
  uint32_t slot = add(s);
  Packet small = udp_to(kTarget, 80, 100);
  Packet big = udp_to(kTarget, 80, 242);
  auto cost = [&](const Packet& p) { return p.bytes.size() * 8ULL * 1'000'000'000ULL / s.rate_bps; };
  ASSERT_EQ(cost(small), 11'360'000u);

  __sk_buff ctx{};
  uint64_t before = monotonic_ns();
  RunResult first = run(egress_fd(), small, &ctx);
  uint64_t after = monotonic_ns();
  ASSERT_EQ(first.err, 0);
  EXPECT_EQ(first.verdict, Verdict::Pass);
  EXPECT_GE(first.ctx_out.tstamp, before) << "an idle link sends the first packet now";
  EXPECT_LE(first.ctx_out.tstamp, after);

  // A departure time set later than the link is free is kept. From then on every
  // packet carries that same early timestamp, so each departs exactly when the one
  // before it is done, however long the test thread sleeps between runs (< 1 s).
  ctx.tstamp = monotonic_ns() + 1'000'000'000ULL;
  RunResult second = run(egress_fd(), small, &ctx);
  ASSERT_EQ(second.err, 0);
  EXPECT_EQ(second.ctx_out.tstamp, ctx.tstamp) << "the link is free before the packet's own departure time";

  uint64_t prev = second.ctx_out.tstamp, prev_cost = cost(small);
  for (int i = 0; i < 10; ++i) {
    const Packet& p = i % 2 == 0 ? big : small;
    RunResult r = run(egress_fd(), p, &ctx);
    ASSERT_EQ(r.err, 0);
    EXPECT_EQ(r.verdict, Verdict::Pass);
    EXPECT_EQ(r.ctx_out.tstamp - prev, prev_cost)
        << "packet " << i + 1 << " departs when the previous one (" << prev_cost << " ns on the wire) is done";
    prev = r.ctx_out.tstamp;
    prev_cost = cost(p);
  }
  EXPECT_EQ(stats(slot).delayed, 12u);
  EXPECT_EQ(stats(slot).dropped, 0u);
}

TEST_F(FaultKindTest, BandwidthDropsWhatWouldLeaveMoreThanTwoSecondsLate) {
  FaultSpec s = make_spec(FaultKind::Bandwidth, {kTarget});
  s.rate_bps = 8'000;  // one 1000-byte frame per second
  uint32_t slot = add(s);
  Packet pkt = udp_to(kTarget, 80, 1000 - 42);
  ASSERT_EQ(pkt.bytes.size(), 1000u);
  __sk_buff ctx{};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(run(egress_fd(), pkt, &ctx).verdict, Verdict::Pass) << "packet " << i << " leaves within 2 s";
  }
  EXPECT_EQ(run(egress_fd(), pkt, &ctx).verdict, Verdict::Redirect) << "the 4th would leave 3 s from now";
  EXPECT_EQ(stats(slot).dropped, 1u);
  EXPECT_EQ(stats(slot).delayed, 3u);
  EXPECT_EQ(reason(FL_DROP_RATE_HORIZON), 1u);
}

}  // namespace
}  // namespace faultline::bpftest
