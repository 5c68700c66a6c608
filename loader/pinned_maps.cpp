// Opening (or creating) the pinned maps, and per-CPU value helpers.
#include "loader/pinned_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/stat.h>

#include "loader/netfault_object.h"

namespace faultline {

const std::vector<std::string>& PinnedMaps::names() {
  static const std::vector<std::string> n = {"fl_control", "fl_faults", "fl_exact", "fl_prefix",
                                             "fl_dns",     "fl_stats",  "fl_reasons", "fl_lossst",
                                             "fl_rate",    "fl_dist",   "fl_meta",  "fl_attach",
                                             "fl_exfilt"};
  return n;
}

Result<PinnedMaps> PinnedMaps::open(const BpffsLayout& layout, bool create) {
  PinnedMaps m;
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

int possible_cpus() {
  static const int n = libbpf_num_possible_cpus();
  return n;
}

template <typename T>
Result<std::vector<T>> lookup_percpu(int map_fd, uint32_t key) {
  static_assert(sizeof(T) % 8 == 0, "per-CPU values are 8-byte aligned");
  std::vector<T> v(static_cast<size_t>(possible_cpus()));
  if (bpf_map_lookup_elem(map_fd, &key, v.data()) != 0) return errno_error("per-CPU lookup failed");
  return v;
}

template <typename T>
Status zero_percpu(int map_fd, uint32_t key) {
  std::vector<T> v(static_cast<size_t>(possible_cpus()));
  if (bpf_map_update_elem(map_fd, &key, v.data(), BPF_ANY) != 0) return errno_error("per-CPU reset failed");
  return {};
}

template Result<std::vector<fl_fault_stats>> lookup_percpu(int, uint32_t);
template Result<std::vector<uint64_t>> lookup_percpu(int, uint32_t);
template Result<std::vector<fl_loss_state>> lookup_percpu(int, uint32_t);
template Status zero_percpu<fl_fault_stats>(int, uint32_t);
template Status zero_percpu<fl_loss_state>(int, uint32_t);
template Status zero_percpu<uint64_t>(int, uint32_t);

}  // namespace faultline
