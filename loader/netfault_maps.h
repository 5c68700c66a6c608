// Typed access to the pinned maps shared by every netfault program and faultctl.
#pragma once

#include <cstdint>
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
  [[nodiscard]] static Result<NetfaultMaps> open(const BpffsLayout& layout, bool create);

  [[nodiscard]] bool created() const { return created_; }
  [[nodiscard]] int control() const { return control_.get(); }
  [[nodiscard]] int faults() const { return faults_.get(); }
  [[nodiscard]] int exact() const { return exact_.get(); }
  [[nodiscard]] int prefix() const { return prefix_.get(); }
  // fl_prefix's hash mirror and its list of lengths (FL_IDX_PREFIX_HASH); FaultTable keeps them.
  [[nodiscard]] int prefix_hash() const { return prefix_hash_.get(); }
  [[nodiscard]] int prefix_lens() const { return prefix_lens_.get(); }
  [[nodiscard]] int prefix_bloom() const { return prefix_bloom_.get(); }
  [[nodiscard]] int exact_bloom() const { return exact_bloom_.get(); }
  [[nodiscard]] int dns() const { return dns_.get(); }
  [[nodiscard]] int stats() const { return stats_.get(); }
  [[nodiscard]] int reasons() const { return reasons_.get(); }
  [[nodiscard]] int loss_state() const { return loss_state_.get(); }
  [[nodiscard]] int rate() const { return rate_.get(); }
  [[nodiscard]] int dist() const { return dist_.get(); }
  [[nodiscard]] int meta() const { return meta_.get(); }
  [[nodiscard]] int attach() const { return attach_.get(); }
  [[nodiscard]] int budget() const { return budget_.get(); }
  [[nodiscard]] int rng() const { return rng_.get(); }

  // Every pinned map name, for uninstall.
  static const std::vector<std::string>& names();
  // Names maps were pinned under before a rename that kept their layout
  // (fl_lossst, fl_exfilt), so that uninstall removes a leftover one too.
  static const std::vector<std::string>& retired_names();

 private:
  NetfaultMaps() = default;
  bool created_ = false;
  UniqueFd control_, faults_, exact_, prefix_, dns_, stats_, reasons_, loss_state_, rate_, dist_, meta_, attach_,
      exact_bloom_, budget_, rng_, prefix_hash_, prefix_lens_, prefix_bloom_;
};

}  // namespace faultline
