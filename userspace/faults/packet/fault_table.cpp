// Fault slots and their indexes. Invariant kept here: every fl_prefix bucket
// lists, after its own faults, the faults of every shorter prefix covering it,
// sorted by (prefix length, specificity) descending, so one LPM lookup in the
// program finds every candidate in order and the first that applies wins.
// fl_prefix is the only prefix index written key by key; write_index() makes
// fl_prefix_hash / fl_prefix_bloom / fl_prefix_lens its mirror (the program's fast path).
#include "userspace/faults/packet/fault_table.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <set>

#include "base/clock.h"
#include "base/seeded_random.h"
#include "loader/map_ops.h"

namespace faultline {
namespace {

fl_lpm_key lpm_key(const Prefix& p) {
  fl_lpm_key k{};
  k.prefixlen = p.plen;
  k.addr = p.addr;
  return k;
}

Prefix from_key(const fl_lpm_key& k) {
  Prefix p;
  p.addr = k.addr;
  p.plen = static_cast<uint8_t>(k.prefixlen);
  return p;
}

bool remove_from(fl_bucket& b, uint32_t slot) {
  bool found = false;
  uint8_t w = 0;
  for (uint8_t i = 0; i < b.n && i < FL_BUCKET_SLOTS; ++i) {
    if (b.slot[i] == slot) {
      found = true;
      continue;
    }
    b.slot[w] = b.slot[i];
    b.plen[w] = b.plen[i];
    ++w;
  }
  b.n = w;
  return found;
}

std::string domain_of(const fl_dns_key& k) {
  std::string name(reinterpret_cast<const char*>(k.name), k.prefixlen / 8 - 1);
  std::reverse(name.begin(), name.end());
  return name;
}

// Whether name a is b or a parent of b. Keys end in '.', so a byte prefix is a label prefix.
bool name_covers(const fl_dns_key& a, const fl_dns_key& b) {
  return a.prefixlen <= b.prefixlen && std::memcmp(a.name, b.name, a.prefixlen / 8) == 0;
}

bool has_owner(const fl_bucket& b, uint32_t key_plen) {
  for (uint8_t i = 0; i < b.n && i < FL_BUCKET_SLOTS; ++i) {
    if (b.plen[i] == key_plen) return true;
  }
  return false;
}

}  // namespace

int specificity(const fl_fault& f) {
  int s = 0;
  s += f.ifindex != 0;
  s += f.proto != 0;
  s += f.port_hi != 0;
  s += (f.flags & FL_F_MATCH_LOCAL) != 0;
  s += f.cgroup_id != 0;
  s += std::popcount(static_cast<unsigned>(f.dir_mask)) == 1;
  return s;
}

fl_dns_key dns_key_for(const std::string& domain) {
  fl_dns_key k{};
  std::string rev(domain.rbegin(), domain.rend());
  rev += '.';
  std::memcpy(k.name, rev.data(), std::min(rev.size(), sizeof(k.name)));
  k.prefixlen = static_cast<uint32_t>(rev.size() * 8);
  return k;
}

Result<uint32_t> FaultTable::allocate_slot() const {
  std::set<uint32_t> used;
  for (uint32_t slot : map_keys<uint32_t>(maps_.meta())) used.insert(slot);
  for (uint32_t s = 0; s < FL_MAX_FAULTS; ++s) {
    if (!used.contains(s)) return s;
  }
  return make_error(ENOSPC, "all " + std::to_string(FL_MAX_FAULTS) + " fault slots are in use");
}

Status FaultTable::insert_into(fl_bucket& b, uint32_t slot, uint8_t plen, const std::string& where) const {
  for (uint8_t i = 0; i < b.n; ++i) {
    if (b.slot[i] == slot) return {};
  }
  if (b.n >= FL_BUCKET_SLOTS)
    return make_error(ENOSPC, "more than " + std::to_string(FL_BUCKET_SLOTS) + " faults overlap on " + where);
  auto spec_of = [&](uint32_t s) {
    fl_fault f{};
    bpf_map_lookup_elem(maps_.faults(), &s, &f);
    return specificity(f);
  };
  int mine = spec_of(slot);
  uint8_t pos = 0;
  while (pos < b.n) {
    bool before = plen > b.plen[pos] || (plen == b.plen[pos] && mine > spec_of(b.slot[pos]));
    if (before) break;
    ++pos;
  }
  for (uint8_t i = b.n; i > pos; --i) {
    b.slot[i] = b.slot[i - 1];
    b.plen[i] = b.plen[i - 1];
  }
  b.slot[pos] = static_cast<uint16_t>(slot);
  b.plen[pos] = plen;
  ++b.n;
  return {};
}

Status FaultTable::insert_exact(uint32_t slot, const Prefix& p) {
  fl_bucket b{};
  bpf_map_lookup_elem(maps_.exact(), &p.addr, &b);
  FL_TRY(insert_into(b, slot, 128, p.str()));
  if (bpf_map_update_elem(maps_.exact(), &p.addr, &b, BPF_ANY) != 0)
    return errno_error("cannot add " + p.str() + " to the exact-address index");
  return {};
}

Status FaultTable::insert_prefix(uint32_t slot, const Prefix& p) {
  fl_lpm_key key = lpm_key(p);
  fl_bucket b{};
  fl_lpm_key probe = key;
  if (bpf_map_lookup_elem(maps_.prefix(), &probe, &b) == 0) {
    // Either the key itself or its longest cover: a cover's bucket lists exactly
    // the faults that cover p too, but as inherited, never as owners.
  }
  FL_TRY(insert_into(b, slot, p.plen, p.str()));
  if (bpf_map_update_elem(maps_.prefix(), &key, &b, BPF_ANY) != 0)
    return errno_error("cannot add " + p.str() + " to the prefix index");
  // Every longer prefix inside p inherits the fault.
  std::vector<fl_lpm_key> inside;
  for_each_key<fl_lpm_key>(maps_.prefix(), [&](const fl_lpm_key& k) {
    if (k.prefixlen > p.plen && prefix_covers(p, from_key(k))) inside.push_back(k);
  });
  for (auto& k : inside) {
    fl_bucket kb{};
    if (bpf_map_lookup_elem(maps_.prefix(), &k, &kb) != 0) continue;
    FL_TRY(insert_into(kb, slot, p.plen, from_key(k).str()));
    if (bpf_map_update_elem(maps_.prefix(), &k, &kb, BPF_ANY) != 0)
      return errno_error("cannot update the prefix index at " + from_key(k).str());
  }
  return {};
}

Status FaultTable::add(uint32_t slot, const CompiledFault& f, const fl_meta& meta) {
  FL_TRY(zero_percpu<fl_fault_stats>(maps_.stats(), slot));
  FL_TRY(zero_percpu<fl_loss_state>(maps_.loss_state(), slot));
  fl_rate_state rs{};
  bpf_map_update_elem(maps_.rate(), &slot, &rs, BPF_ANY);
  // Written whole (zeros without a cap) before the entry is active, so a slot's
  // earlier counter never carries over.
  if (bpf_map_update_elem(maps_.budget(), &slot, &f.budget, BPF_ANY) != 0)
    return errno_error("cannot write the injection cap of fault slot " + std::to_string(slot));
  // Every possible CPU's generator state, before the entry is active: the same
  // seed gives each CPU the same stream in every run.
  if (f.entry.flags & FL_F_SEEDED) {
    std::vector<fl_rng> per_cpu(static_cast<size_t>(possible_cpus()));
    for (size_t cpu = 0; cpu < per_cpu.size(); ++cpu) per_cpu[cpu] = {seeded_state(f.seed, cpu), f.seed};
    if (bpf_map_update_elem(maps_.rng(), &slot, per_cpu.data(), BPF_ANY) != 0)
      return errno_error("cannot write the seeded generator of fault slot " + std::to_string(slot));
  }

  fl_fault inactive = f.entry;
  inactive.expires_ns = 0;
  if (bpf_map_update_elem(maps_.faults(), &slot, &inactive, BPF_ANY) != 0)
    return errno_error("cannot write fault slot " + std::to_string(slot));
  fl_meta m = meta;
  m.n_exact = static_cast<uint32_t>(f.exact.size());
  m.n_prefix = static_cast<uint32_t>(f.prefixes.size());
  m.n_dns = static_cast<uint32_t>(f.dns.size());
  if (bpf_map_update_elem(maps_.meta(), &slot, &m, BPF_NOEXIST) != 0)
    return errno_error("cannot claim fault slot " + std::to_string(slot));

  auto fail = [&](const Error& e) -> Status {
    (void)remove(slot);
    return e;
  };
  for (const auto& p : f.exact) {
    if (auto st = insert_exact(slot, p); !st) return fail(st.error());
  }
  for (const auto& p : f.prefixes) {
    if (auto st = insert_prefix(slot, p); !st) return fail(st.error());
  }
  // The program does one longest-prefix lookup and each name leads to one fault:
  // a name inside (or above) another fault's name would hide that fault whenever
  // the nested one does not apply (direction, resolver, expiry), and queries the
  // other fault blocks would pass. So overlaps are refused like the same name.
  if (!f.dns.empty()) {
    for (const fl_dns_key& indexed : map_keys<fl_dns_key>(maps_.dns())) {
      uint32_t owner = 0;
      if (bpf_map_lookup_elem(maps_.dns(), &indexed, &owner) == 0 && owner != slot) {
        for (const auto& k : f.dns) {
          if (name_covers(indexed, k) || name_covers(k, indexed))
            return fail(make_error(EEXIST, "--domains " + domain_of(k) + ": overlaps " + domain_of(indexed) +
                                               ", which another active dns fault blocks"));
        }
      }
    }
  }
  for (const auto& k : f.dns) {
    uint32_t v = slot;
    if (bpf_map_update_elem(maps_.dns(), &k, &v, BPF_NOEXIST) != 0) {
      std::string name(reinterpret_cast<const char*>(k.name), k.prefixlen / 8 - 1);
      std::reverse(name.begin(), name.end());
      if (errno == EEXIST)
        return fail(make_error(EEXIST, "--domains " + name + ": another active dns fault already blocks this name"));
      return fail(errno_error("cannot add " + name + " to the DNS index"));
    }
  }
  // The programs must not skip an index that now leads to this fault.
  if (auto st = index_new_exact(f.exact, !f.prefixes.empty() || !f.dns.empty()); !st) return fail(st.error());
  if (bpf_map_update_elem(maps_.faults(), &slot, &f.entry, BPF_EXIST) != 0)
    return fail(errno_error("cannot activate fault slot " + std::to_string(slot)));
  return {};
}

namespace {

// fl_exact_bloom is one flat bit array: its 64-byte values lie back to back in the
// mapping, so bit h is bit h % 64 of word h / 64.
constexpr size_t kFilterWords = size_t{FL_EXACT_BLOOM_BLOCKS} * (FL_EXACT_BLOOM_BLOCK_BITS / 64);

uint32_t exact_bloom_bit(const fl_addr& a) {
  uint32_t w[4];
  std::memcpy(w, a.b, sizeof(w));
  return fl_exact_bloom_hash(w[0], w[1], w[2], w[3]);
}

}  // namespace

Result<MappedMap> FaultTable::map_filter() const {
  return MappedMap::map(maps_.exact_bloom(), kFilterWords * sizeof(uint64_t));
}

// fl_prefix_hash is made to hold every fl_prefix key (masked to its length)
// with the same bucket, fl_prefix_bloom the filter bit of each, and
// fl_prefix_lens the lengths present, longest first.
// Order keeps every packet's answer the trie's: a key is written before its
// length is listed, a length is unlisted before its keys go (stale_out, deleted
// by the caller once the control is written). Returns whether the lengths fit
// the list (FL_PREFIX_HASH_LENS), i.e. whether the control may vouch for it.
Result<bool> FaultTable::mirror_prefixes(std::vector<fl_lpm_key>& stale_out) const {
  std::set<fl_lpm_key, bool (*)(const fl_lpm_key&, const fl_lpm_key&)> want(
      [](const fl_lpm_key& a, const fl_lpm_key& b) { return std::memcmp(&a, &b, sizeof(a)) < 0; });
  std::set<uint32_t, std::greater<>> lens;
  for (const auto& k : map_keys<fl_lpm_key>(maps_.prefix())) {
    fl_bucket b{};
    if (bpf_map_lookup_elem(maps_.prefix(), &k, &b) != 0) continue;
    fl_lpm_key hk{};
    hk.prefixlen = k.prefixlen;
    const fl_addr m = from_key(k).mask();
    for (int i = 0; i < 16; ++i) hk.addr.b[i] = k.addr.b[i] & m.b[i];
    fl_bucket have{};
    if (bpf_map_lookup_elem(maps_.prefix_hash(), &hk, &have) != 0 || std::memcmp(&have, &b, sizeof(b)) != 0) {
      if (bpf_map_update_elem(maps_.prefix_hash(), &hk, &b, BPF_ANY) != 0)
        return errno_error("cannot write the prefix index's hash mirror at " + from_key(k).str());
    }
    want.insert(hk);
    lens.insert(k.prefixlen);
  }
  for (const auto& k : map_keys<fl_lpm_key>(maps_.prefix_hash())) {
    if (!want.contains(k)) stale_out.push_back(k);
  }
  // The filter whole from the wanted keys, stored word by word where it differs:
  // a packet reads one word, old or new, and either has the bit of every key
  // still wanted; a new key's bit is in before its length is listed below.
  constexpr size_t kWords = size_t{FL_PREFIX_BLOOM_BLOCKS} * (FL_EXACT_BLOOM_BLOCK_BITS / 64);
  std::vector<uint64_t> bits(kWords);
  for (const auto& k : want) {
    uint32_t w[4];
    std::memcpy(w, k.addr.b, sizeof(w));
    uint32_t h = fl_prefix_bloom_hash(k.prefixlen, w[0], w[1], w[2], w[3]);
    bits[h / 64] |= 1ULL << (h % 64);
  }
  auto filter = MappedMap::map(maps_.prefix_bloom(), kWords * sizeof(uint64_t));
  if (!filter) return filter.error();
  uint64_t* have = filter->as<uint64_t>();
  for (size_t i = 0; i < kWords; ++i) {
    std::atomic_ref<uint64_t> word(have[i]);
    if (word.load(std::memory_order_relaxed) != bits[i]) word.store(bits[i], std::memory_order_relaxed);
  }
  if (lens.size() > FL_PREFIX_HASH_LENS) return false;
  fl_prefix_lens pl{};
  for (uint32_t len : lens) pl.len[pl.n++] = static_cast<uint8_t>(len);
  uint32_t zero = 0;
  fl_prefix_lens cur{};
  if (bpf_map_lookup_elem(maps_.prefix_lens(), &zero, &cur) != 0 || std::memcmp(&cur, &pl, sizeof(pl)) != 0) {
    if (bpf_map_update_elem(maps_.prefix_lens(), &zero, &pl, BPF_ANY) != 0)
      return errno_error("cannot write the prefix lengths list");
  }
  return true;
}

// The control gets its FL_IDX_* bits; written only when they change.
Status FaultTable::write_index(bool filter_valid) const {
  uint32_t index = filter_valid ? FL_IDX_EXACT_FILTER : 0;
  if (map_is_empty<fl_lpm_key>(maps_.prefix())) index |= FL_IDX_NO_PREFIX;
  if (map_is_empty<fl_dns_key>(maps_.dns())) index |= FL_IDX_NO_DNS;
  std::vector<fl_lpm_key> stale;
  auto hashed = mirror_prefixes(stale);
  if (!hashed) return hashed.error();
  if (*hashed) index |= FL_IDX_PREFIX_HASH;
  uint32_t zero = 0;
  fl_control ctl{};
  if (bpf_map_lookup_elem(maps_.control(), &zero, &ctl) != 0) return errno_error("cannot read the control map");
  if (ctl.index != index) {
    ctl.index = index;  // only the index: armed (the kill switch) stays as read
    if (bpf_map_update_elem(maps_.control(), &zero, &ctl, BPF_ANY) != 0)
      return errno_error("cannot update the control map");
  }
  for (const auto& k : stale) bpf_map_delete_elem(maps_.prefix_hash(), &k);
  return {};
}

// The new filter is computed whole from the keys, then stored word by word where
// it differs. A packet reads one word, old or new; either has the bit of every key
// still indexed (a word only loses the bits of removed keys), so the filter may be
// vouched for throughout. Callers hold the state lock: no other writer interleaves.
Status FaultTable::summarise_indexes() const {
  std::vector<uint64_t> want(kFilterWords);
  constexpr uint32_t kChunk = 4096;
  std::vector<fl_addr> keys(kChunk);
  std::vector<fl_bucket> vals(kChunk);
  fl_addr token{};  // hash batches resume from a bucket number; key-sized is enough
  // A batch read walks every bucket (1M of them) even when no key is there.
  bool first = true, done = map_is_empty<fl_addr>(maps_.exact());
  while (!done) {
    uint32_t count = kChunk;
    LIBBPF_OPTS(bpf_map_batch_opts, o);
    int err =
        bpf_map_lookup_batch(maps_.exact(), first ? nullptr : &token, &token, keys.data(), vals.data(), &count, &o);
    if (err != 0 && errno != ENOENT) return errno_error("cannot read the exact-address index");
    done = err != 0;
    first = false;
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t h = exact_bloom_bit(keys[i]);
      want[h / 64] |= 1ULL << (h % 64);
    }
  }
  auto filter = map_filter();
  if (!filter) return filter.error();
  uint64_t* have = filter->as<uint64_t>();
  for (size_t i = 0; i < kFilterWords; ++i) {
    std::atomic_ref<uint64_t> w(have[i]);
    if (w.load(std::memory_order_relaxed) != want[i]) w.store(want[i], std::memory_order_relaxed);
  }
  return write_index(true);
}

// A fault's new addresses only add bits: each is set in its own 64-byte block
// of the filter, read and written back whole with one map write (mapping the
// 1 MiB filter to set one bit cost ~0.1 ms, its munmap a TLB flush on every CPU
// running a thread of the process). Callers hold the state lock, so no other
// writer interleaves; a packet reading a word mid-write sees old or new bytes,
// and each new byte holds every bit of the old one. A control that does not
// vouch for the filter yet (pins from before it) gets it rebuilt.
// other_indexes: the fault also added prefixes or DNS names, whose summary
// bits (and the prefix mirror) write_index() must bring up to date; with
// exact addresses alone every bit of a control write_index() wrote stays what
// it was.
Status FaultTable::index_new_exact(const std::vector<Prefix>& exact, bool other_indexes) const {
  uint32_t zero = 0;
  fl_control ctl{};
  if (bpf_map_lookup_elem(maps_.control(), &zero, &ctl) != 0) return errno_error("cannot read the control map");
  if (!(ctl.index & FL_IDX_EXACT_FILTER)) return summarise_indexes();
  for (const auto& p : exact) {
    const uint32_t h = exact_bloom_bit(p.addr);
    const uint32_t block = h / FL_EXACT_BLOOM_BLOCK_BITS;
    const __u64 bit = 1ULL << (h % 64);
    fl_exact_bloom_block b{};
    if (bpf_map_lookup_elem(maps_.exact_bloom(), &block, &b) != 0)
      return errno_error("cannot read the exact-address filter at " + p.str());
    __u64& word = b.w[(h / 64) % (FL_EXACT_BLOOM_BLOCK_BITS / 64)];
    if (word & bit) continue;
    word |= bit;
    if (bpf_map_update_elem(maps_.exact_bloom(), &block, &b, BPF_EXIST) != 0)
      return errno_error("cannot set " + p.str() + " in the exact-address filter");
  }
  // Fresh maps (initialise_maps) do not vouch for the prefix mirror yet: the
  // first write_index() does, and from then on only a change to the prefixes
  // or names can change a bit.
  if (!other_indexes && (ctl.index & FL_IDX_PREFIX_HASH)) return {};
  return write_index(true);
}

Status FaultTable::deactivate(uint32_t slot) {
  fl_fault f{};
  if (bpf_map_lookup_elem(maps_.faults(), &slot, &f) != 0) return errno_error("cannot read fault slot");
  if (f.expires_ns == 0) return {};
  f.expires_ns = 0;
  if (bpf_map_update_elem(maps_.faults(), &slot, &f, BPF_EXIST) != 0)
    return errno_error("cannot deactivate fault slot " + std::to_string(slot));
  return {};
}

void FaultTable::purge_index(uint32_t slot, const fl_meta& meta) {
  if (meta.n_exact > 0) {
    for (const auto& k : map_keys<fl_addr>(maps_.exact())) {
      fl_bucket b{};
      if (bpf_map_lookup_elem(maps_.exact(), &k, &b) != 0 || !remove_from(b, slot)) continue;
      if (b.n == 0)
        bpf_map_delete_elem(maps_.exact(), &k);
      else
        bpf_map_update_elem(maps_.exact(), &k, &b, BPF_EXIST);
    }
  }
  {
    // A CIDR fault may be inherited anywhere below its prefix: sweep every key.
    for (const auto& k : map_keys<fl_lpm_key>(maps_.prefix())) {
      fl_bucket b{};
      if (bpf_map_lookup_elem(maps_.prefix(), &k, &b) != 0 || !remove_from(b, slot)) continue;
      if (!has_owner(b, k.prefixlen))
        bpf_map_delete_elem(maps_.prefix(), &k);
      else
        bpf_map_update_elem(maps_.prefix(), &k, &b, BPF_EXIST);
    }
  }
  if (meta.n_dns > 0) {
    for (const auto& k : map_keys<fl_dns_key>(maps_.dns())) {
      uint32_t v = 0;
      if (bpf_map_lookup_elem(maps_.dns(), &k, &v) == 0 && v == slot) bpf_map_delete_elem(maps_.dns(), &k);
    }
  }
}

Status FaultTable::remove(uint32_t slot) {
  fl_meta meta{};
  if (bpf_map_lookup_elem(maps_.meta(), &slot, &meta) != 0) return {};  // already gone
  (void)deactivate(slot);
  purge_index(slot, meta);
  // Only ever makes the programs skip more; if it fails, they skip less than
  // they could, which is slower but right.
  (void)summarise_indexes();
  fl_fault zero{};
  bpf_map_update_elem(maps_.faults(), &slot, &zero, BPF_ANY);
  fl_budget no_budget{};
  bpf_map_update_elem(maps_.budget(), &slot, &no_budget, BPF_ANY);
  bpf_map_delete_elem(maps_.meta(), &slot);
  return {};
}

bool FaultTable::exists(uint32_t slot) const {
  fl_meta m{};
  return bpf_map_lookup_elem(maps_.meta(), &slot, &m) == 0;
}

Result<fl_fault_stats> FaultTable::stats(uint32_t slot) const {
  return sum_percpu<fl_fault_stats>(maps_.stats(), slot, [](fl_fault_stats& sum, const fl_fault_stats& s) {
    sum.matched += s.matched;
    sum.dropped += s.dropped;
    sum.corrupted += s.corrupted;
    sum.duplicated += s.duplicated;
    sum.delayed += s.delayed;
    sum.bytes += s.bytes;
  });
}

std::optional<uint64_t> FaultTable::seed(uint32_t slot) const {
  fl_fault f{};
  if (bpf_map_lookup_elem(maps_.faults(), &slot, &f) != 0 || !(f.flags & FL_F_SEEDED)) return std::nullopt;
  auto per_cpu = lookup_percpu<fl_rng>(maps_.rng(), slot);
  if (!per_cpu || per_cpu->empty()) return std::nullopt;
  return per_cpu->front().seed;
}

fl_budget FaultTable::budget(uint32_t slot) const {
  fl_budget b{};
  bpf_map_lookup_elem(maps_.budget(), &slot, &b);
  return b;
}

nlohmann::json cap_json(const fl_budget& b, uint64_t now_ns) {
  if (b.max == 0) return nullptr;
  nlohmann::json j{{"max", b.max}, {"injected", std::min(b.claimed, b.max)}, {"reached", b.claimed >= b.max}};
  if (b.claimed >= b.max) {
    j["spared"] = b.claimed - b.max;  // injections the cap refused
    if (b.reached_ns != 0 && b.reached_ns <= now_ns)
      j["reached_at"] = iso8601(wall_seconds() - static_cast<double>(now_ns - b.reached_ns) / 1e9);
  }
  return j;
}

std::string cap_text(const fl_budget& b, uint64_t now_ns) {
  nlohmann::json j = cap_json(b, now_ns);
  if (j.is_null()) return "";
  if (!j["reached"].get<bool>()) return "cap " + std::to_string(b.max) + ": " + std::to_string(b.claimed) + " injected";
  std::string t = "cap reached: " + std::to_string(b.max) + (b.max == 1 ? " injection" : " injections");
  if (j.contains("reached_at")) t += " at " + j["reached_at"].get<std::string>();
  return t + " (" + std::to_string(b.claimed - b.max) + " spared)";
}

const char* drop_reason_name(uint32_t reason) {
  switch (reason) {
    case FL_DROP_LOSS:
      return "loss";
    case FL_DROP_PARTITION:
      return "partition";
    case FL_DROP_FLOWDROP:
      return "flowdrop";
    case FL_DROP_DNS:
      return "dns";
    case FL_DROP_RATE_HORIZON:
      return "rate_horizon";
    default:
      return "none";
  }
}

std::vector<uint64_t> FaultTable::drop_reasons() const {
  std::vector<uint64_t> out(FL_DROP_REASON_MAX, 0);
  for (uint32_t r = 0; r < FL_DROP_REASON_MAX; ++r) out[r] = sum_percpu<uint64_t>(maps_.reasons(), r).value_or(0);
  return out;
}

std::vector<FaultRow> FaultTable::list() const {
  std::vector<FaultRow> rows;
  for_each_key<uint32_t>(maps_.meta(), [&](uint32_t slot) {
    FaultRow r;
    r.slot = slot;
    if (bpf_map_lookup_elem(maps_.meta(), &slot, &r.meta) == 0) {
      bpf_map_lookup_elem(maps_.faults(), &slot, &r.fault);
      if (auto s = stats(slot)) r.stats = *s;
      r.budget = budget(slot);
      r.seed = seed(slot);
      rows.push_back(r);
    }
  });
  std::sort(rows.begin(), rows.end(), [](const FaultRow& a, const FaultRow& b) { return a.slot < b.slot; });
  return rows;
}

}  // namespace faultline
