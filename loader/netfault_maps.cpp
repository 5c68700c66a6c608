// Opening (or creating) the pinned maps.
#include "loader/netfault_maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>

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

namespace {

// The maps a resident process keeps per layout root (NetfaultMaps::keep_open).
struct KeptMaps {
  UniqueFd watch;  // inotify on the maps folder, set before `maps` were opened
  dev_t dev = 0;   // the maps folder's identity when the watch was set
  ino_t ino = 0;
  std::optional<NetfaultMaps> maps;
};

std::atomic<bool> g_keep_open{false};
std::mutex g_kept_mu;
std::map<std::string, KeptMaps>& kept_maps() {
  static std::map<std::string, KeptMaps> m;
  return m;
}

constexpr uint32_t kWatchMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;

// A watch on the folder and its identity, or nothing when it is not there.
std::optional<KeptMaps> watch_maps_dir(const std::string& dir) {
  KeptMaps k;
  k.watch.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!k.watch) return std::nullopt;
  if (::inotify_add_watch(k.watch.get(), dir.c_str(), kWatchMask | IN_ONLYDIR) < 0) return std::nullopt;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return std::nullopt;
  k.dev = st.st_dev;
  k.ino = st.st_ino;
  return k;
}

// Whether nothing under the folder changed since the watch was set: no event
// (an overflow is an event too) and the same folder at the path.
bool still_pinned(const KeptMaps& k, const std::string& dir) {
  alignas(inotify_event) char buf[4096];
  const ssize_t n = ::read(k.watch.get(), buf, sizeof buf);
  if (n != -1 || errno != EAGAIN) return false;
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && st.st_dev == k.dev && st.st_ino == k.ino;
}

}  // namespace

void NetfaultMaps::keep_open(bool keep) {
  g_keep_open = keep;
  if (!keep) {
    std::lock_guard lock(g_kept_mu);
    kept_maps().clear();
  }
}

void NetfaultMaps::forget_kept(const BpffsLayout& layout) {
  std::lock_guard lock(g_kept_mu);
  kept_maps().erase(layout.root);
}

Result<NetfaultMaps> NetfaultMaps::open(const BpffsLayout& layout, bool create) {
  if (!g_keep_open) return open_pins(layout, create);
  std::lock_guard lock(g_kept_mu);
  auto& all = kept_maps();
  if (auto it = all.find(layout.root); it != all.end()) {
    if (it->second.maps && still_pinned(it->second, layout.maps())) return *it->second.maps;
    all.erase(it);
  }
  // The watch first, then the pins: whatever changes after they were opened
  // shows on it. Where the folder is not there yet, the pins are made first and
  // opened a second time under the new watch.
  auto watched = watch_maps_dir(layout.maps());
  auto m = open_pins(layout, create);
  if (!m) return m.error();
  if (!watched) {
    watched = watch_maps_dir(layout.maps());
    if (!watched) return m;  // no watch to be had: nothing kept
    auto again = open_pins(layout, false);
    if (!again) return m;
    watched->maps = std::move(*again);
  } else {
    watched->maps = *m;
    watched->maps->created_ = false;
  }
  all[layout.root] = std::move(*watched);
  return m;
}

Result<NetfaultMaps> NetfaultMaps::open_pins(const BpffsLayout& layout, bool create) {
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
  static_assert(kCount == 18);
  auto fds = std::make_shared<Fds>();
  for (size_t i = 0; i < names().size(); ++i) {
    int fd = bpf_obj_get(layout.map(names()[i]).c_str());
    if (fd < 0) return errno_error("cannot open pinned map " + layout.map(names()[i]));
    (*fds)[i].reset(fd);
  }
  m.fds_ = std::move(fds);
  return m;
}

}  // namespace faultline
