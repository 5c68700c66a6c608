// The pinned fault table: slots, the address/DNS indexes that point at them, counters.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/units.h"
#include "faultline/abi.h"
#include "loader/mapped_map.h"
#include "loader/netfault_maps.h"
#include "userspace/net/address.h"

namespace faultline {

// A fault ready for the kernel: its entry and the index keys that lead to it.
struct CompiledFault {
  fl_fault entry{};              // expires_ns is set when it is activated
  fl_budget budget{};            // with FL_F_BUDGET in entry.flags; start_ns is set when it is activated
  uint64_t seed = 0;             // with FL_F_SEEDED in entry.flags: every CPU's fl_rng state comes from it
  std::vector<Prefix> exact;     // /32 and /128 targets -> fl_exact
  std::vector<Prefix> prefixes;  // shorter targets (and /0 for "every address") -> fl_prefix
  std::vector<fl_dns_key> dns;   // reversed domain keys -> fl_dns
};

// How narrowly a fault is scoped beyond its address: more fields set wins a tie.
[[nodiscard]] int specificity(const fl_fault& f);

// The DNS index key for a normalised domain ("example.com" -> "moc.elpmaxe.").
[[nodiscard]] fl_dns_key dns_key_for(const std::string& domain);

struct FaultRow {
  uint32_t slot = 0;
  fl_meta meta{};
  fl_fault fault{};
  fl_fault_stats stats{};
  fl_budget budget{};
  std::optional<uint64_t> seed;  // as the kernel holds it (fl_rng), for a seeded fault
};

// The cap of a fault as people and JSON see it: {"max", "injected", "reached",
// "reached_at", "spared"}; null without a cap. `now` on CLOCK_BOOTTIME.
[[nodiscard]] nlohmann::json cap_json(const fl_budget& b, uint64_t now_ns);
// "cap reached: 20 injections at 2026-...Z (13 spared)" or "cap 20: 7 injected"; empty without a cap.
[[nodiscard]] std::string cap_text(const fl_budget& b, uint64_t now_ns);
// The name of a drop reason (FL_DROP_*) in status and metrics: "loss", "dns", ...
[[nodiscard]] const char* drop_reason_name(uint32_t reason);

class FaultTable {
 public:
  explicit FaultTable(const NetfaultMaps& maps) : maps_(maps) {}

  [[nodiscard]] Result<uint32_t> allocate_slot() const;

  // Writes the entry inactive, then the indexes, then activates it: the fault
  // starts at one instant. On failure everything written is removed again.
  [[nodiscard]] Status add(uint32_t slot, const CompiledFault& f, const fl_meta& meta);

  // Ends the fault at once (one map write); the indexes stay until remove().
  [[nodiscard]] Status deactivate(uint32_t slot);

  // Deactivates, removes every index entry of the slot, then frees the slot.
  [[nodiscard]] Status remove(uint32_t slot);

  // Rebuilds fl_exact_bloom from every fl_exact key and sets the FL_IDX_* bits of
  // fl_control to what the indexes hold. remove() calls it (add() only adds its
  // own bits); whoever writes the indexes another way (the benchmark) must call it.
  [[nodiscard]] Status summarise_indexes() const;

  [[nodiscard]] std::vector<FaultRow> list() const;
  [[nodiscard]] bool exists(uint32_t slot) const;
  [[nodiscard]] Result<fl_fault_stats> stats(uint32_t slot) const;
  [[nodiscard]] fl_budget budget(uint32_t slot) const;
  // The seed a fault's generator started from; none for an unseeded fault.
  [[nodiscard]] std::optional<uint64_t> seed(uint32_t slot) const;
  [[nodiscard]] std::vector<uint64_t> drop_reasons() const;

 private:
  [[nodiscard]] Status insert_exact(uint32_t slot, const Prefix& p);
  [[nodiscard]] Status insert_prefix(uint32_t slot, const Prefix& p);
  [[nodiscard]] Status insert_into(fl_bucket& b, uint32_t slot, uint8_t plen, const std::string& where) const;
  void purge_index(uint32_t slot, const fl_meta& meta);
  [[nodiscard]] Result<MappedMap> map_filter() const;
  [[nodiscard]] Status write_index(bool filter_valid) const;
  [[nodiscard]] Result<bool> mirror_prefixes(std::vector<fl_lpm_key>& stale_out) const;
  [[nodiscard]] Status index_new_exact(const std::vector<Prefix>& exact, bool other_indexes) const;
  const NetfaultMaps& maps_;
};

}  // namespace faultline
