// Where netfault programs are attached: TCX links or tc filters, recorded in fl_attach.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "faultline/abi.h"
#include "loader/bpffs.h"
#include "loader/netfault_maps.h"
#include "loader/netns.h"

namespace faultline {

enum class AttachMode { Auto, Tcx, Tc };

[[nodiscard]] const char* attach_mode_name(uint32_t mode);  // FL_ATTACH_* -> "tcx" / "tc"
[[nodiscard]] uint32_t attach_mode_value(AttachMode mode);  // -> FL_ATTACH_*, 0 for Auto

struct AttachmentRecord {
  fl_attach_key key{};
  fl_attach_val val{};
};

class NetfaultAttachments {
 public:
  NetfaultAttachments(const BpffsLayout& layout, const NetfaultMaps& maps) : layout_(layout), maps_(maps) {}

  // The mode (FL_ATTACH_*) these devices and directions of the namespace are
  // already attached with, or 0 if none is. A namespace runs one mode.
  [[nodiscard]] uint32_t mode_in_use(const NetnsRef& ns, const std::vector<NetDevice>& devs, uint8_t dir_mask) const;

  // Attaches a program for every device and direction not yet attached in this
  // namespace; loads one program instance for them. Returns the mode in use.
  // A mode other than the one in use is refused (EBUSY).
  [[nodiscard]] Result<uint32_t> ensure(const NetnsRef& ns, const std::vector<NetDevice>& devs, uint8_t dir_mask,
                                        AttachMode mode);

  [[nodiscard]] std::vector<AttachmentRecord> list() const;

  // Detaches one attachment and forgets it.
  [[nodiscard]] Status detach(const AttachmentRecord& rec);

  // Detaches every recorded attachment of a namespace (all when netns_ino is 0).
  [[nodiscard]] Status detach_all(uint32_t netns_ino = 0);

  // Detaches programs of ours that the kernel still runs but no record names
  // (a crash between attach and record): TCX links found by link queries, and tc
  // filters found on the devices of the host and of every named namespace.
  // With foreign_too, also those bound to another state's maps (uninstall).
  [[nodiscard]] Result<int> reconcile_orphans(bool foreign_too = false);

 private:
  [[nodiscard]] std::string link_pin(const fl_attach_key& k) const;
  const BpffsLayout& layout_;
  const NetfaultMaps& maps_;
};

// Whether a program id is one of ours (named fl_egress / fl_ingress).
// A resident process (faultd) loads one namespace's programs before its first
// run needs them, in the mode ensure() would choose there (TCX, else clsact):
// the load and the verifier's pass move to its start. ensure() attaches these
// instead of loading anew while they match the namespace and mode and use the
// maps pinned now (after a teardown they are dropped). Held until the process ends.
[[nodiscard]] Status prepare_netfault_programs(const BpffsLayout& layout, const NetfaultMaps& maps, const NetnsRef& ns);
// Whether this process holds prepared programs that ensure() would use for ns now.
[[nodiscard]] bool netfault_programs_prepared(const BpffsLayout& layout, const NetfaultMaps& maps, const NetnsRef& ns);

[[nodiscard]] bool is_netfault_prog(uint32_t prog_id);

// The id of the fl_control map a netfault program uses (which state it belongs to).
[[nodiscard]] std::optional<uint32_t> netfault_control_map(uint32_t prog_id);

// Whether a program (by id) references a map (by fd): programs attached by an
// older faultctl do not use maps added since.
[[nodiscard]] bool prog_uses_map(uint32_t prog_id, int map_fd);

// Counts the netfault programs loaded in the kernel: all of them, or with a map
// id, those of the state whose fl_control map it is (uninstall's check).
[[nodiscard]] int count_netfault_progs(std::optional<uint32_t> control_map_id = std::nullopt);

// The id of the layout's pinned fl_control map; nullopt when nothing is pinned.
[[nodiscard]] std::optional<uint32_t> pinned_control_map_id(const BpffsLayout& layout);

}  // namespace faultline
