// Typed access to the pinned maps shared by every netfault program and faultctl.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "faultline/abi.h"
#include "loader/bpffs.h"

namespace faultline {

class NetfaultMaps {
 public:
  // Opens the pins; with create, loads the object once to create and pin them
  // first (then `created()` is true and the caller initialises them). A map
  // still pinned under a retired name is moved to its current name first.
  // With keep_open() on, the pins a layout had are opened once and their fds
  // reused while they stay the pinned ones.
  [[nodiscard]] static Result<NetfaultMaps> open(const BpffsLayout& layout, bool create);

  // A resident process (faultd) keeps the maps it opened, per layout, and each
  // open() reuses their fds instead of opening the 18 pins again. An inotify
  // watch on the maps folder, set before the pins it keeps were opened, and the
  // folder's (device, inode) tell when a pin was removed, added, renamed or the
  // folder replaced (a teardown, a new state, another bpffs mounted there): the
  // pins are then opened anew. Off (the default): every open() opens every pin.
  static void keep_open(bool keep);
  // Drops the maps kept for the layout (this process tore its state down).
  static void forget_kept(const BpffsLayout& layout);

  [[nodiscard]] bool created() const { return created_; }
  [[nodiscard]] int control() const { return fd(kControl); }
  [[nodiscard]] int faults() const { return fd(kFaults); }
  [[nodiscard]] int exact() const { return fd(kExact); }
  [[nodiscard]] int prefix() const { return fd(kPrefix); }
  // fl_prefix's hash mirror and its list of lengths (FL_IDX_PREFIX_HASH); FaultTable keeps them.
  [[nodiscard]] int prefix_hash() const { return fd(kPrefixHash); }
  [[nodiscard]] int prefix_lens() const { return fd(kPrefixLens); }
  [[nodiscard]] int prefix_bloom() const { return fd(kPrefixBloom); }
  [[nodiscard]] int exact_bloom() const { return fd(kExactBloom); }
  [[nodiscard]] int dns() const { return fd(kDns); }
  [[nodiscard]] int stats() const { return fd(kStats); }
  [[nodiscard]] int reasons() const { return fd(kReasons); }
  [[nodiscard]] int loss_state() const { return fd(kLossState); }
  [[nodiscard]] int rate() const { return fd(kRate); }
  [[nodiscard]] int dist() const { return fd(kDist); }
  [[nodiscard]] int meta() const { return fd(kMeta); }
  [[nodiscard]] int attach() const { return fd(kAttach); }
  [[nodiscard]] int budget() const { return fd(kBudget); }
  [[nodiscard]] int rng() const { return fd(kRng); }

  // Every pinned map name, for uninstall.
  static const std::vector<std::string>& names();
  // Names maps were pinned under before a rename that kept their layout
  // (fl_lossst, fl_exfilt), so that uninstall removes a leftover one too.
  static const std::vector<std::string>& retired_names();

 private:
  // Indexes into fds_, in the order of names().
  enum : size_t {
    kControl,
    kFaults,
    kExact,
    kPrefix,
    kDns,
    kStats,
    kReasons,
    kLossState,
    kRate,
    kDist,
    kMeta,
    kAttach,
    kExactBloom,
    kBudget,
    kRng,
    kPrefixHash,
    kPrefixLens,
    kPrefixBloom,
    kCount
  };
  using Fds = std::array<UniqueFd, kCount>;
  [[nodiscard]] static Result<NetfaultMaps> open_pins(const BpffsLayout& layout, bool create);
  [[nodiscard]] int fd(size_t i) const { return fds_ ? (*fds_)[i].get() : -1; }

  NetfaultMaps() = default;
  bool created_ = false;
  // Shared by copies (and with the kept maps of keep_open()); closed with the last.
  std::shared_ptr<const Fds> fds_;
};

}  // namespace faultline
