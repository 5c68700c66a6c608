// The index summary in fl_control (FL_IDX_*) and the exact-address filter
// fl_exact_bloom: they let a packet skip lookups that cannot hit, never one that can.
#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <cstring>
#include <random>
#include <set>

#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

// With no prefix at all the hash mirror is (trivially) valid too.
constexpr uint32_t kAllSkips = FL_IDX_EXACT_FILTER | FL_IDX_NO_PREFIX | FL_IDX_NO_DNS | FL_IDX_PREFIX_HASH;

class IndexSummaryTest : public NetfaultTest {
 protected:
  fl_control control() const {
    uint32_t zero = 0;
    fl_control c{};
    EXPECT_EQ(bpf_map_lookup_elem(maps().control(), &zero, &c), 0) << std::strerror(errno);
    return c;
  }
  void set_index(uint32_t index) const {
    fl_control c = control();
    c.index = index;
    uint32_t zero = 0;
    ASSERT_EQ(bpf_map_update_elem(maps().control(), &zero, &c, BPF_ANY), 0) << std::strerror(errno);
  }
  bool filter_has(const std::string& addr) const {
    uint32_t h = filter_bit(addr), block = h / FL_EXACT_BLOOM_BLOCK_BITS;
    fl_exact_bloom_block b{};
    EXPECT_EQ(bpf_map_lookup_elem(maps().exact_bloom(), &block, &b), 0) << std::strerror(errno);
    return (b.w[(h / 64) % (FL_EXACT_BLOOM_BLOCK_BITS / 64)] >> (h % 64)) & 1;
  }
  static uint32_t filter_bit(const std::string& text) {
    uint32_t w[4];
    std::memcpy(w, prefix(text).addr.b, sizeof(w));
    return fl_exact_bloom_hash(w[0], w[1], w[2], w[3]);
  }
  void clear_filter() const {
    fl_exact_bloom_block none{};
    for (uint32_t i = 0; i < FL_EXACT_BLOOM_BLOCKS; ++i)
      ASSERT_EQ(bpf_map_update_elem(maps().exact_bloom(), &i, &none, BPF_ANY), 0) << std::strerror(errno);
  }
};

TEST_F(IndexSummaryTest, IndexBitsFollowWhatTheIndexesHold) {
  // Fresh maps (initialise_maps) do not vouch for the prefix mirror yet; with no
  // prefix at all FL_IDX_NO_PREFIX skips it anyway, and the first write sets it.
  EXPECT_EQ(control().index | FL_IDX_PREFIX_HASH, kAllSkips) << "nothing indexed: every skip holds";
  EXPECT_FALSE(filter_has("192.0.2.1"));
  uint32_t exact = add(make_spec(FaultKind::Partition, {"192.0.2.1"}));
  EXPECT_EQ(control().index, kAllSkips) << "an exact address is behind the filter, not a skip bit";
  EXPECT_TRUE(filter_has("192.0.2.1"));
  uint32_t cidr = add(make_spec(FaultKind::Partition, {"192.0.2.128/25"}));
  EXPECT_EQ(control().index, FL_IDX_EXACT_FILTER | FL_IDX_NO_DNS | FL_IDX_PREFIX_HASH)
      << "a CIDR fault needs the prefix lookup";
  FaultSpec dns = make_spec(FaultKind::Dns);
  dns.domains = {"example.com"};
  uint32_t name = add(dns);
  EXPECT_EQ(control().index, FL_IDX_EXACT_FILTER | FL_IDX_PREFIX_HASH) << "a DNS fault needs the query name lookup";

  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect);
  EXPECT_EQ(egress(udp_to("192.0.2.200")), Verdict::Redirect);
  EXPECT_EQ(egress(dns_query("www.example.com")), Verdict::Redirect);

  ASSERT_TRUE(table().remove(cidr));
  EXPECT_EQ(control().index, FL_IDX_EXACT_FILTER | FL_IDX_NO_PREFIX | FL_IDX_PREFIX_HASH);
  ASSERT_TRUE(table().remove(name));
  EXPECT_EQ(control().index, kAllSkips);
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "the exact fault outlives the others";
  ASSERT_TRUE(table().remove(exact));
  EXPECT_FALSE(filter_has("192.0.2.1")) << "a removed address leaves no bit behind";
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass);
  EXPECT_EQ(control().index, kAllSkips);
  EXPECT_EQ(control().armed, 1u) << "summarising the indexes leaves the kill switch alone";
}

// The program and FaultTable hash each address on their own; a single bit of
// disagreement would hide a flowdrop target. Thousands of random addresses of
// both families, every one of which must be found.
TEST_F(IndexSummaryTest, EveryListedAddressPassesTheFilter) {
  std::mt19937 rng(20261130);
  std::set<std::string> listed;
  char buf[INET6_ADDRSTRLEN];
  while (listed.size() < 3000) {
    uint32_t v4 = htonl(rng());
    inet_ntop(AF_INET, &v4, buf, sizeof(buf));
    listed.insert(buf);
    uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8};
    for (int i = 4; i < 16; i += 4) {
      uint32_t r = rng();
      std::memcpy(v6 + i, &r, 4);
    }
    inet_ntop(AF_INET6, v6, buf, sizeof(buf));
    listed.insert(buf);
  }
  FaultSpec s = make_spec(FaultKind::Flowdrop);
  for (const auto& a : listed) s.targets.push_back(prefix(a));
  add(s);
  ASSERT_TRUE(control().index & FL_IDX_EXACT_FILTER);
  size_t missed = 0;
  for (const auto& a : listed) missed += egress(udp_to(a)) != Verdict::Redirect;
  EXPECT_EQ(missed, 0u) << "listed addresses the program did not find";

  // An unlisted address whose filter bit a listed one set: the filter lets it
  // through to the hash lookup, which finds nothing.
  std::set<uint32_t> bits;
  for (const auto& a : listed) bits.insert(filter_bit(a));
  std::string twin;
  for (uint32_t i = 1; twin.empty() && i < 10'000'000; ++i) {
    uint32_t v4 = htonl(0xC6120000U + i);  // 198.18.0.1 upwards
    inet_ntop(AF_INET, &v4, buf, sizeof(buf));
    if (bits.contains(filter_bit(buf)) && !listed.contains(buf)) twin = buf;
  }
  ASSERT_FALSE(twin.empty()) << "no colliding address found";
  EXPECT_EQ(egress(udp_to(twin)), Verdict::Pass) << twin << " shares a filter bit with a listed address only";
}

// What an older faultctl leaves (index 0, an empty filter) makes every lookup.
// The reverse shows the skips are really taken: a control that wrongly vouches
// for an empty index hides its faults.
TEST_F(IndexSummaryTest, ZeroIndexMakesEveryLookupAndSkipBitsAreHonoured) {
  add(make_spec(FaultKind::Partition, {"192.0.2.1"}));
  add(make_spec(FaultKind::Partition, {"198.51.100.0/24"}));
  FaultSpec dns = make_spec(FaultKind::Dns);
  dns.domains = {"example.com"};
  add(dns);
  clear_filter();
  set_index(0);
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "exact lookup without a filter";
  EXPECT_EQ(egress(udp_to("198.51.100.9")), Verdict::Redirect) << "prefix lookup";
  EXPECT_EQ(egress(dns_query("example.com")), Verdict::Redirect) << "query name lookup";

  set_index(kAllSkips);  // lies: the filter is empty and both tries hold keys
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass) << "the filter is consulted before the hash";
  EXPECT_EQ(egress(udp_to("198.51.100.9")), Verdict::Pass) << "FL_IDX_NO_PREFIX skips the prefix lookup";
  EXPECT_EQ(egress(dns_query("example.com")), Verdict::Pass) << "FL_IDX_NO_DNS skips the query name";

  set_index(0);
  add(make_spec(FaultKind::Flowdrop, {"192.0.2.7"}));
  EXPECT_EQ(control().index, FL_IDX_EXACT_FILTER | FL_IDX_PREFIX_HASH)
      << "a control that vouched for no filter gets one rebuilt";
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "an address indexed before the rebuild";
  EXPECT_EQ(egress(udp_to("192.0.2.7")), Verdict::Redirect);

  clear_filter();
  ASSERT_TRUE(table().summarise_indexes());
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Redirect) << "a rebuilt summary finds every fault again";
  EXPECT_EQ(egress(udp_to("198.51.100.9")), Verdict::Redirect);
  EXPECT_EQ(egress(dns_query("example.com")), Verdict::Redirect);
}

TEST_F(IndexSummaryTest, KillSwitchStaysOffThroughIndexChanges) {
  set_armed(0);
  uint32_t slot = add(make_spec(FaultKind::Partition, {"192.0.2.0/24"}));
  EXPECT_EQ(control().armed, 0u) << "adding a fault rewrote the control map";
  EXPECT_EQ(egress(udp_to("192.0.2.1")), Verdict::Pass);
  ASSERT_TRUE(table().remove(slot));
  EXPECT_EQ(control().armed, 0u) << "removing a fault rewrote the control map";
}

}  // namespace
}  // namespace faultline::bpftest
