// Opening (or creating) the pinned maps.
#include "loader/netfault_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include "loader/netfault_object.h"

namespace faultline {
namespace {

// Maps renamed with their layout unchanged: {retired name, current name}.
struct RenamedPin {
  const char* retired;
  const char* current;
};
constexpr RenamedPin kRenamedPins[] = {
    {"fl_lossst", "fl_loss_state"},
    {"fl_exfilt", "fl_exact_bloom"},
};

// State pinned before a rename keeps the map, which programs attached back then
// still use, under the retired name. The pin moves to the current name, and the
// map with it: libbpf reuses a pinned map found at the object's pin path after
// checking its type, sizes and flags, never its own name (which stays the old
// one in `bpftool map` until the state is torn down). Pinning a second, empty
// map instead would split old and new programs, and an empty fl_exact_bloom
// under a control that vouches for the filter would hide every exact-address
// fault from the new ones. A retired pin beside a current one is a leftover
// that nothing opens: it goes.
Status adopt_renamed_pins(const BpffsLayout& layout) {
  for (const auto& r : kRenamedPins) {
    const std::string retired = layout.map(r.retired), current = layout.map(r.current);
    struct stat st {};
    if (::stat(retired.c_str(), &st) != 0) continue;
    if (::stat(current.c_str(), &st) != 0) {
      UniqueFd fd(bpf_obj_get(retired.c_str()));
      if (!fd) return errno_error("cannot open pinned map " + retired);
      // EEXIST: another faultctl moved it first.
      if (bpf_obj_pin(fd.get(), current.c_str()) != 0 && errno != EEXIST)
        return errno_error("cannot pin " + retired + " under its new name " + current);
    }
    if (::unlink(retired.c_str()) != 0 && errno != ENOENT) return errno_error("cannot remove " + retired);
  }
  return {};
}

}  // namespace

const std::vector<std::string>& NetfaultMaps::names() {
  static const std::vector<std::string> n = {
      "fl_control",     "fl_faults",     "fl_exact", "fl_prefix",      "fl_dns",         "fl_stats",
      "fl_reasons",     "fl_loss_state", "fl_rate",  "fl_dist",        "fl_meta",        "fl_attach",
      "fl_exact_bloom", "fl_budget",     "fl_rng",   "fl_prefix_hash", "fl_prefix_lens", "fl_prefix_bloom"};
  return n;
}

const std::vector<std::string>& NetfaultMaps::retired_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& r : kRenamedPins) v.emplace_back(r.retired);
    return v;
  }();
  return n;
}

Result<NetfaultMaps> NetfaultMaps::open(const BpffsLayout& layout, bool create) {
  NetfaultMaps m;
  FL_TRY(adopt_renamed_pins(layout));
  struct stat st {};
  if (::stat(layout.map("fl_attach").c_str(), &st) != 0) {
    if (!create) return make_error(ENOENT, "Faultline is not installed (nothing pinned under " + layout.root + ")");
    FL_TRY(ensure_bpffs(layout));
    // Opening the object with no program to load creates and pins every map.
    auto obj = NetfaultObject::load(layout, 0, 0, 0);
    if (!obj) return obj.error();
    m.created_ = true;
  } else if (::stat(layout.map("fl_exact_bloom").c_str(), &st) != 0 ||
             ::stat(layout.map("fl_budget").c_str(), &st) != 0 || ::stat(layout.map("fl_rng").c_str(), &st) != 0 ||
             ::stat(layout.map("fl_prefix_hash").c_str(), &st) != 0 ||
             ::stat(layout.map("fl_prefix_lens").c_str(), &st) != 0 ||
             ::stat(layout.map("fl_prefix_bloom").c_str(), &st) != 0) {
    // State pinned before the filter map (or the budget, generator or prefix-mirror map) existed at all:
    // loading the object once pins the missing map and reuses the rest. Its
    // control vouches for no filter yet; the programs attached back then never
    // read fl_budget or fl_rng, which is why a capped, delayed or seeded fault
    // checks them (prog_uses_map) before it relies on either.
    auto obj = NetfaultObject::load(layout, 0, 0, 0);
    if (!obj) return obj.error();
  }
  UniqueFd* fds[] = {&m.control_,     &m.faults_,     &m.exact_, &m.prefix_,      &m.dns_,         &m.stats_,
                     &m.reasons_,     &m.loss_state_, &m.rate_,  &m.dist_,        &m.meta_,        &m.attach_,
                     &m.exact_bloom_, &m.budget_,     &m.rng_,   &m.prefix_hash_, &m.prefix_lens_, &m.prefix_bloom_};
  for (size_t i = 0; i < names().size(); ++i) {
    int fd = bpf_obj_get(layout.map(names()[i]).c_str());
    if (fd < 0) return errno_error("cannot open pinned map " + layout.map(names()[i]));
    fds[i]->reset(fd);
  }
  return m;
}

}  // namespace faultline
