// Opening (or creating) the pinned maps.
#include "loader/netfault_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include "loader/netfault_object.h"

namespace faultline {

const std::vector<std::string>& NetfaultMaps::names() {
  static const std::vector<std::string> n = {"fl_control", "fl_faults", "fl_exact", "fl_prefix",
                                             "fl_dns",     "fl_stats",  "fl_reasons", "fl_lossst",
                                             "fl_rate",    "fl_dist",   "fl_meta",  "fl_attach",
                                             "fl_exfilt"};
  return n;
}

Result<NetfaultMaps> NetfaultMaps::open(const BpffsLayout& layout, bool create) {
  NetfaultMaps m;
  struct stat st {};
  if (::stat(layout.map("fl_attach").c_str(), &st) != 0) {
    if (!create) return make_error(ENOENT, "Faultline is not installed (nothing pinned under " + layout.root + ")");
    FL_TRY(ensure_bpffs(layout));
    // Opening the object with no program to load creates and pins every map.
    auto obj = NetfaultObject::load(layout, 0, 0, 0);
    if (!obj) return obj.error();
    m.created_ = true;
  } else if (::stat(layout.map("fl_exfilt").c_str(), &st) != 0) {
    // State pinned before fl_exfilt existed: loading the object once pins the
    // missing map and reuses the rest. Its control vouches for no filter yet.
    auto obj = NetfaultObject::load(layout, 0, 0, 0);
    if (!obj) return obj.error();
  }
  UniqueFd* fds[] = {&m.control_, &m.faults_, &m.exact_, &m.prefix_, &m.dns_,  &m.stats_,
                     &m.reasons_, &m.lossst_, &m.rate_,  &m.dist_,   &m.meta_, &m.attach_, &m.exfilt_};
  for (size_t i = 0; i < names().size(); ++i) {
    int fd = bpf_obj_get(layout.map(names()[i]).c_str());
    if (fd < 0) return errno_error("cannot open pinned map " + layout.map(names()[i]));
    fds[i]->reset(fd);
  }
  return m;
}

}  // namespace faultline
