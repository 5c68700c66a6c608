// The prefix index's fast path: fl_prefix_hash probed once per length listed in
// fl_prefix_lens (longest first) answers exactly what the fl_prefix trie walk
// would, and the trie takes over when more lengths are present than the list holds.
#include <bpf/bpf.h>

#include <cstring>
#include <string>
#include <vector>

#include "selftests/bpf/netfault_fixture.h"

namespace faultline::bpftest {
namespace {

class PrefixIndexTest : public NetfaultTest {
 protected:
  uint32_t index_bits() const {
    uint32_t zero = 0;
    fl_control c{};
    EXPECT_EQ(bpf_map_lookup_elem(maps().control(), &zero, &c), 0) << std::strerror(errno);
    return c.index;
  }
  void set_hash_bit(bool on) const {
    uint32_t zero = 0;
    fl_control c{};
    ASSERT_EQ(bpf_map_lookup_elem(maps().control(), &zero, &c), 0) << std::strerror(errno);
    c.index = on ? (c.index | FL_IDX_PREFIX_HASH) : (c.index & ~FL_IDX_PREFIX_HASH);
    ASSERT_EQ(bpf_map_update_elem(maps().control(), &zero, &c, BPF_ANY), 0) << std::strerror(errno);
  }
  std::vector<uint32_t> lens() const {
    uint32_t zero = 0;
    fl_prefix_lens pl{};
    EXPECT_EQ(bpf_map_lookup_elem(maps().prefix_lens(), &zero, &pl), 0) << std::strerror(errno);
    return {pl.len, pl.len + std::min<uint32_t>(pl.n, FL_PREFIX_HASH_LENS)};
  }
  // The slot whose fault the packet matched (its matched counter moved), or -1.
  int64_t matched_slot(const Packet& pkt, const std::vector<uint32_t>& slots) {
    std::vector<uint64_t> before;
    for (uint32_t s : slots) before.push_back(stats(s).matched);
    Verdict v = egress(pkt);
    int64_t hit = -1;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (stats(slots[i]).matched != before[i]) {
        EXPECT_EQ(hit, -1) << "two faults counted one packet";
        hit = slots[i];
      }
    }
    EXPECT_EQ(v, hit == -1 ? Verdict::Pass : Verdict::Redirect);
    return hit;
  }
  // Both paths, the hash probes and the trie walk, give the same slot.
  int64_t both_paths(const std::string& addr, uint16_t port, const std::vector<uint32_t>& slots) {
    const bool hashed = index_bits() & FL_IDX_PREFIX_HASH;
    int64_t fast = matched_slot(udp_to(addr, port), slots);
    set_hash_bit(false);
    int64_t trie = matched_slot(udp_to(addr, port), slots);
    set_hash_bit(hashed);
    EXPECT_EQ(fast, trie) << addr << ": the hash probes and the trie walk disagree";
    return fast;
  }
  size_t mirror_keys() const { return count_keys<fl_lpm_key>(maps().prefix_hash()); }
  size_t trie_keys() const { return count_keys<fl_lpm_key>(maps().prefix()); }
};

TEST_F(PrefixIndexTest, LongestMatchAcrossLengthsV4) {
  uint32_t s8 = add(make_spec(FaultKind::Partition, {"10.0.0.0/8"}));
  uint32_t s16 = add(make_spec(FaultKind::Partition, {"10.1.0.0/16"}));
  uint32_t s24 = add(make_spec(FaultKind::Partition, {"10.1.2.0/24"}));
  uint32_t s28 = add(make_spec(FaultKind::Partition, {"10.1.2.16/28"}));
  ASSERT_TRUE(index_bits() & FL_IDX_PREFIX_HASH) << "4 lengths fit the list";
  EXPECT_EQ(lens(), (std::vector<uint32_t>{96 + 28, 96 + 24, 96 + 16, 96 + 8})) << "longest first";
  EXPECT_EQ(mirror_keys(), trie_keys());
  const std::vector<uint32_t> all = {s8, s16, s24, s28};
  EXPECT_EQ(both_paths("10.1.2.17", 80, all), s28);
  EXPECT_EQ(both_paths("10.1.2.31", 80, all), s28);
  EXPECT_EQ(both_paths("10.1.2.32", 80, all), s24);
  EXPECT_EQ(both_paths("10.1.2.15", 80, all), s24);
  EXPECT_EQ(both_paths("10.1.3.1", 80, all), s16);
  EXPECT_EQ(both_paths("10.2.0.1", 80, all), s8);
  EXPECT_EQ(both_paths("11.0.0.1", 80, all), -1);
  EXPECT_EQ(both_paths("2001:db8::1", 80, all), -1) << "IPv4 prefixes leave IPv6";

  ASSERT_TRUE(table().remove(s24));
  EXPECT_EQ(lens(), (std::vector<uint32_t>{96 + 28, 96 + 16, 96 + 8})) << "a length no key has is unlisted";
  EXPECT_EQ(mirror_keys(), trie_keys()) << "the removed key left the mirror too";
  EXPECT_EQ(both_paths("10.1.2.32", 80, all), s16);
  EXPECT_EQ(both_paths("10.1.2.17", 80, all), s28);
}

TEST_F(PrefixIndexTest, LongestMatchAcrossLengthsV6) {
  uint32_t s32 = add(make_spec(FaultKind::Partition, {"2001:db8::/32"}));
  uint32_t s48 = add(make_spec(FaultKind::Partition, {"2001:db8:1::/48"}));
  uint32_t s61 = add(make_spec(FaultKind::Partition, {"2001:db8:1:8::/61"}));
  uint32_t s99 = add(make_spec(FaultKind::Partition, {"2001:db8:1:8:0:2000::/99"}));
  ASSERT_TRUE(index_bits() & FL_IDX_PREFIX_HASH);
  EXPECT_EQ(lens(), (std::vector<uint32_t>{99, 61, 48, 32}));
  const std::vector<uint32_t> all = {s32, s48, s61, s99};
  EXPECT_EQ(both_paths("2001:db8:1:8:0:2000::5", 80, all), s99);
  EXPECT_EQ(both_paths("2001:db8:1:8:0:2000:1fff:ffff", 80, all), s99) << "last address of the /99";
  EXPECT_EQ(both_paths("2001:db8:1:8:0:2000:2000:0", 80, all), s61) << "just past the /99";
  EXPECT_EQ(both_paths("2001:db8:1:f::1", 80, all), s61) << "the /61 spans :8 to :f";
  EXPECT_EQ(both_paths("2001:db8:1:10::1", 80, all), s48);
  EXPECT_EQ(both_paths("2001:db8:ffff::1", 80, all), s32);
  EXPECT_EQ(both_paths("2001:db9::1", 80, all), -1);
  EXPECT_EQ(both_paths("10.0.0.1", 80, all), -1) << "IPv6 prefixes leave IPv4";
}

TEST_F(PrefixIndexTest, SlashZeroUnderLongerPrefixes) {
  uint32_t every = add(make_spec(FaultKind::Partition));  // ::/0
  uint32_t v4all = add(make_spec(FaultKind::Partition, {"0.0.0.0/0"}));
  uint32_t s24 = add(make_spec(FaultKind::Partition, {"192.0.2.0/24"}));
  ASSERT_TRUE(index_bits() & FL_IDX_PREFIX_HASH);
  EXPECT_EQ(lens(), (std::vector<uint32_t>{96 + 24, 96, 0})) << "/0 is a length like any other";
  const std::vector<uint32_t> all = {every, v4all, s24};
  EXPECT_EQ(both_paths("192.0.2.1", 80, all), s24);
  EXPECT_EQ(both_paths("203.0.113.9", 80, all), v4all);
  EXPECT_EQ(both_paths("2001:db8::9", 80, all), every);
  ASSERT_TRUE(table().remove(v4all));
  EXPECT_EQ(both_paths("203.0.113.9", 80, all), every) << "::/0 holds every IPv4-mapped address too";
}

// A bucket lists its own faults, then every cover's: a longer prefix whose fault
// does not apply to this packet (port) falls through to the shorter one's fault
// in the same bucket, on the hash path as on the trie.
TEST_F(PrefixIndexTest, OverlappingPrefixesWithDifferentFaults) {
  FaultSpec https = make_spec(FaultKind::Partition, {"198.18.5.0/24"});
  https.ports = {443, 443};
  https.proto = IPPROTO_UDP;
  uint32_t s24 = add(https);
  uint32_t s16 = add(make_spec(FaultKind::Partition, {"198.18.0.0/16"}));
  FaultSpec narrow = make_spec(FaultKind::Partition, {"198.18.5.128/25"});
  narrow.ports = {53, 53};
  narrow.proto = IPPROTO_UDP;
  uint32_t s25 = add(narrow);
  const std::vector<uint32_t> all = {s24, s16, s25};
  EXPECT_EQ(both_paths("198.18.5.1", 443, all), s24);
  EXPECT_EQ(both_paths("198.18.5.1", 80, all), s16) << "the /24's fault is port 443 only";
  EXPECT_EQ(both_paths("198.18.5.200", 53, all), s25);
  EXPECT_EQ(both_paths("198.18.5.200", 443, all), s24) << "inherited by the /25's bucket";
  EXPECT_EQ(both_paths("198.18.5.200", 80, all), s16) << "inherited through two lengths";
  EXPECT_EQ(both_paths("198.18.6.1", 443, all), s16);
  ASSERT_TRUE(table().remove(s24));
  EXPECT_EQ(both_paths("198.18.5.200", 443, all), s16);
  EXPECT_EQ(both_paths("198.18.5.1", 443, all), s16) << "the /24 key went with its only owner";
}

// fl_prefix_bloom decides whether a length is probed at all: an empty filter
// (a lie) hides every prefix on the hash path, and a rebuilt summary brings them back.
TEST_F(PrefixIndexTest, FilterIsConsultedAndRebuilt) {
  uint32_t s = add(make_spec(FaultKind::Partition, {"192.0.2.0/24"}));
  uint32_t v6 = add(make_spec(FaultKind::Partition, {"2001:db8:7::/48"}));
  ASSERT_TRUE(index_bits() & FL_IDX_PREFIX_HASH);
  EXPECT_EQ(matched_slot(udp_to("192.0.2.9"), {s, v6}), s);
  fl_exact_bloom_block none{};
  for (uint32_t i = 0; i < FL_PREFIX_BLOOM_BLOCKS; ++i)
    ASSERT_EQ(bpf_map_update_elem(maps().prefix_bloom(), &i, &none, BPF_ANY), 0) << std::strerror(errno);
  EXPECT_EQ(matched_slot(udp_to("192.0.2.9"), {s, v6}), -1) << "no bit, no probe";
  EXPECT_EQ(matched_slot(udp_to("2001:db8:7::1"), {s, v6}), -1);
  ASSERT_TRUE(table().summarise_indexes());
  EXPECT_EQ(matched_slot(udp_to("192.0.2.9"), {s, v6}), s);
  EXPECT_EQ(matched_slot(udp_to("2001:db8:7::1"), {s, v6}), v6);
}

// More distinct lengths than fl_prefix_lens holds: the control stops vouching
// for the mirror and the program walks the trie; below the limit again, back.
TEST_F(PrefixIndexTest, ManyLengthsFallBackToTheTrie) {
  std::vector<uint32_t> slots;
  // (20+i).0.0.0/(8+2i), i = 0..9: ten disjoint prefixes of ten lengths, /8 to /26
  // (disjoint: a bucket holds at most 8 overlapping faults), and a /16 inside the /8.
  for (int i = 0; i < 10; ++i)
    slots.push_back(
        add(make_spec(FaultKind::Partition, {std::to_string(20 + i) + ".0.0.0/" + std::to_string(8 + 2 * i)})));
  uint32_t nested = add(make_spec(FaultKind::Partition, {"20.0.0.0/16"}));
  std::vector<uint32_t> all = slots;
  all.push_back(nested);
  ASSERT_EQ(slots.size(), 10u);
  EXPECT_FALSE(index_bits() & FL_IDX_PREFIX_HASH) << "10 lengths > " << FL_PREFIX_HASH_LENS << ": the trie";
  EXPECT_EQ(mirror_keys(), trie_keys()) << "the mirror is kept even while unused";
  EXPECT_EQ(matched_slot(udp_to("20.0.5.5"), all), nested);
  EXPECT_EQ(matched_slot(udp_to("20.1.0.0"), all), slots[0]);
  EXPECT_EQ(matched_slot(udp_to("21.63.0.1"), all), slots[1]);
  EXPECT_EQ(matched_slot(udp_to("29.0.0.63"), all), slots[9]);
  EXPECT_EQ(matched_slot(udp_to("29.0.0.64"), all), -1) << "past the /26";

  ASSERT_TRUE(table().remove(slots[1]));
  ASSERT_TRUE(table().remove(slots[3]));
  ASSERT_TRUE(index_bits() & FL_IDX_PREFIX_HASH) << "8 lengths fit the list again";
  EXPECT_EQ(lens().size(), 8u);
  EXPECT_EQ(both_paths("20.0.5.5", 80, all), nested);
  EXPECT_EQ(both_paths("20.1.0.0", 80, all), slots[0]);
  EXPECT_EQ(both_paths("21.0.0.1", 80, all), -1) << "the /10 is gone";
  EXPECT_EQ(both_paths("22.15.0.1", 80, all), slots[2]);
  EXPECT_EQ(both_paths("29.0.0.1", 80, all), slots[9]);
  EXPECT_EQ(both_paths("29.0.0.64", 80, all), -1);
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i != 1 && i != 3) {
      ASSERT_TRUE(table().remove(slots[i]));
    }
  }
  ASSERT_TRUE(table().remove(nested));
  EXPECT_EQ(mirror_keys(), 0u) << "no key is left in the mirror";
  EXPECT_EQ(index_bits() & FL_IDX_NO_PREFIX, FL_IDX_NO_PREFIX);
}

}  // namespace
}  // namespace faultline::bpftest
