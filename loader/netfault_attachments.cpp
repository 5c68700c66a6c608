// Attaching netfault programs (TCX first, tc clsact as fallback) and undoing it.
#include "loader/netfault_attachments.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <linux/pkt_sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "loader/features.h"
#include "loader/map_ops.h"
#include "loader/netfault_object.h"
#include "loader/rtnetlink.h"
#include "loader/tcx.h"

namespace faultline {
namespace {

constexpr uint32_t kTcHandle = 0xF17E;  // our cls_bpf filter, under clsact
constexpr uint32_t kTcPriority = 1;

bpf_tc_attach_point tc_point(uint32_t dir) { return dir == FL_DIR_EGRESS ? BPF_TC_EGRESS : BPF_TC_INGRESS; }

uint32_t prog_id_of(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

uint32_t link_id_of(int fd) {
  bpf_link_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return 0;
  return info.id;
}

Status detach_tc_filter(uint32_t ifindex, uint32_t dir, bool destroy_clsact) {
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = static_cast<int>(ifindex), .attach_point = tc_point(dir));
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = kTcHandle, .priority = kTcPriority);
  int err = bpf_tc_detach(&hook, &opts);
  if (err != 0 && err != -ENOENT && err != -ENODEV && err != -EINVAL)
    return make_error(err, "cannot remove our tc filter from ifindex " + std::to_string(ifindex));
  if (!destroy_clsact) return {};
  // Remove the clsact qdisc we created only when no filter of anyone remains under it.
  auto in = count_filters(ifindex, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS));
  auto eg = count_filters(ifindex, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS));
  if (in && eg && *in == 0 && *eg == 0) {
    LIBBPF_OPTS(bpf_tc_hook, all, .ifindex = static_cast<int>(ifindex),
                .attach_point = static_cast<bpf_tc_attach_point>(BPF_TC_INGRESS | BPF_TC_EGRESS));
    bpf_tc_hook_destroy(&all);
  }
  return {};
}

}  // namespace

const char* attach_mode_name(uint32_t mode) {
  return mode == FL_ATTACH_TCX ? "tcx" : mode == FL_ATTACH_TC ? "tc" : "?";
}

uint32_t attach_mode_value(AttachMode mode) {
  return mode == AttachMode::Tcx ? FL_ATTACH_TCX : mode == AttachMode::Tc ? FL_ATTACH_TC : 0;
}

namespace {

// The program's info (name, ...) and the ids of the maps it uses; nullopt when
// the program is gone.
std::optional<std::pair<bpf_prog_info, std::vector<uint32_t>>> prog_info_and_maps(int prog_fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return std::nullopt;
  std::vector<uint32_t> ids(info.nr_map_ids);
  bpf_prog_info again{};
  again.nr_map_ids = static_cast<uint32_t>(ids.size());
  again.map_ids = reinterpret_cast<uint64_t>(ids.data());
  len = sizeof(again);
  if (bpf_obj_get_info_by_fd(prog_fd, &again, &len) != 0) return std::nullopt;
  ids.resize(std::min<size_t>(ids.size(), again.nr_map_ids));
  return std::pair{info, std::move(ids)};
}

}  // namespace

bool is_netfault_prog(uint32_t prog_id) { return netfault_control_map(prog_id).has_value(); }

std::optional<uint32_t> netfault_control_map(uint32_t prog_id) {
  int fd = bpf_prog_get_fd_by_id(prog_id);
  if (fd < 0) return std::nullopt;
  UniqueFd prog(fd);
  auto got = prog_info_and_maps(fd);
  if (!got) return std::nullopt;
  const auto& [info, ids] = *got;
  if (std::strcmp(info.name, "fl_egress") != 0 && std::strcmp(info.name, "fl_ingress") != 0) return std::nullopt;
  for (uint32_t id : ids) {
    int mfd = bpf_map_get_fd_by_id(id);
    if (mfd < 0) continue;
    bpf_map_info mi{};
    uint32_t mlen = sizeof(mi);
    bool control = bpf_obj_get_info_by_fd(mfd, &mi, &mlen) == 0 && std::strcmp(mi.name, "fl_control") == 0;
    ::close(mfd);
    if (control) return id;
  }
  return std::nullopt;
}

bool prog_uses_map(uint32_t prog_id, int map_fd) {
  bpf_map_info want{};
  uint32_t wlen = sizeof(want);
  if (bpf_obj_get_info_by_fd(map_fd, &want, &wlen) != 0) return false;
  int fd = bpf_prog_get_fd_by_id(prog_id);
  if (fd < 0) return false;
  UniqueFd prog(fd);
  auto got = prog_info_and_maps(fd);
  return got && std::find(got->second.begin(), got->second.end(), want.id) != got->second.end();
}

namespace {

// The programs a resident process loaded ahead of its first run
// (prepare_netfault_programs): kept while it lives, attached by ensure().
struct PreparedPrograms {
  std::string root;  // the bpffs state they were loaded against
  uint32_t netns_ino = 0;
  uint32_t egress_drop = 0;
  NetfaultObject object;
};
std::mutex g_prepared_mu;
std::optional<PreparedPrograms> g_prepared;

// The prepared programs for this namespace and mode, if they still use the
// maps pinned now (a teardown since, by this or another process, made new ones).
const NetfaultObject* prepared_for(const BpffsLayout& layout, const NetfaultMaps& maps, uint32_t netns_ino,
                                   uint32_t egress_drop) {
  std::lock_guard<std::mutex> hold(g_prepared_mu);
  if (!g_prepared || g_prepared->root != layout.root || g_prepared->netns_ino != netns_ino ||
      g_prepared->egress_drop != egress_drop)
    return nullptr;
  if (!prog_uses_map(prog_id_of(g_prepared->object.egress_fd()), maps.control())) {
    g_prepared.reset();  // stale: loaded against maps that are gone
    return nullptr;
  }
  return &g_prepared->object;
}

uint32_t egress_drop_of(uint32_t mode) {
  return mode == FL_ATTACH_TCX ? FL_EGRESS_DROP_REDIRECT : FL_EGRESS_DROP_STOLEN;
}

}  // namespace

int count_netfault_progs(std::optional<uint32_t> control_map_id) {
  int n = 0;
  for (uint32_t id = 0; bpf_prog_get_next_id(id, &id) == 0;) {
    const auto control = netfault_control_map(id);
    n += control && (!control_map_id || *control == *control_map_id) ? 1 : 0;
  }
  return n;
}

std::optional<uint32_t> pinned_control_map_id(const BpffsLayout& layout) {
  const int fd = bpf_obj_get(layout.map("fl_control").c_str());
  if (fd < 0) return std::nullopt;
  UniqueFd map(fd);
  bpf_map_info info{};
  uint32_t len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) return std::nullopt;
  return info.id;
}

std::string NetfaultAttachments::link_pin(const fl_attach_key& k) const {
  return layout_.links() + "/" + std::to_string(k.netns_ino) + "_" + std::to_string(k.ifindex) +
         (k.dir == FL_DIR_EGRESS ? "_egress" : "_ingress");
}

uint32_t NetfaultAttachments::mode_in_use(const NetnsRef& ns, const std::vector<NetDevice>& devs,
                                          uint8_t dir_mask) const {
  uint32_t mode = 0;
  for (const auto& d : devs) {
    for (uint32_t dir : {uint32_t{FL_DIR_EGRESS}, uint32_t{FL_DIR_INGRESS}}) {
      if ((dir_mask & dir) == 0) continue;
      fl_attach_key key{ns.inode, d.ifindex, dir, 0};
      fl_attach_val val{};
      if (bpf_map_lookup_elem(maps_.attach(), &key, &val) == 0) mode = val.mode;
    }
  }
  return mode;
}

std::vector<AttachmentRecord> NetfaultAttachments::list() const {
  std::vector<AttachmentRecord> out;
  for_each_key<fl_attach_key>(maps_.attach(), [&](const fl_attach_key& k) {
    AttachmentRecord r;
    r.key = k;
    if (bpf_map_lookup_elem(maps_.attach(), &k, &r.val) == 0) out.push_back(r);
  });
  return out;
}

Result<uint32_t> NetfaultAttachments::ensure(const NetnsRef& ns, const std::vector<NetDevice>& devs, uint8_t dir_mask,
                                             AttachMode mode) {
  // What is missing, and which mode the namespace already uses.
  std::vector<std::pair<NetDevice, uint32_t>> missing;
  for (const auto& d : devs) {
    for (uint32_t dir : {uint32_t{FL_DIR_EGRESS}, uint32_t{FL_DIR_INGRESS}}) {
      if ((dir_mask & dir) == 0) continue;
      fl_attach_key key{ns.inode, d.ifindex, dir, 0};
      fl_attach_val val{};
      if (bpf_map_lookup_elem(maps_.attach(), &key, &val) != 0) missing.emplace_back(d, dir);
    }
  }
  const uint32_t existing_mode = mode_in_use(ns, devs, dir_mask);
  uint32_t want = attach_mode_value(mode);
  // A namespace runs one mode; callers check mode_in_use() first and tell the
  // operator what to do about it.
  if (want != 0 && existing_mode != 0 && want != existing_mode) {
    return make_error(EBUSY, "namespace " + ns.display + " already has Faultline attached with " +
                                 attach_mode_name(existing_mode) + ", not " + attach_mode_name(want));
  }
  if (want == 0) want = existing_mode;
  if (want == 0) {
    const auto& f = packet_features();
    if (f.tcx.available) {
      want = FL_ATTACH_TCX;
    } else if (f.clsact.available) {
      want = FL_ATTACH_TC;
    } else {
      return make_error(
          ENOTSUP, "no way to attach packet programs: TCX (" + f.tcx.detail + "), clsact (" + f.clsact.detail + ")");
    }
  }
  if (missing.empty()) return want;

  uint8_t dirs = 0;
  for (const auto& [dev, dir] : missing) dirs |= static_cast<uint8_t>(dir);
  // Loaded ahead by a resident process, or now (the verifier's pass).
  std::optional<NetfaultObject> loaded;
  const NetfaultObject* obj = prepared_for(layout_, maps_, ns.inode, egress_drop_of(want));
  if (obj == nullptr) {
    auto l = NetfaultObject::load(layout_, ns.inode, egress_drop_of(want), dirs);
    if (!l) return l.error();
    loaded.emplace(std::move(*l));
    obj = &*loaded;
  }
  auto inside = NetnsEnter::enter(ns);
  if (!inside) return inside.error();

  for (const auto& [dev, dir] : missing) {
    int prog = dir == FL_DIR_EGRESS ? obj->egress_fd() : obj->ingress_fd();
    fl_attach_key key{ns.inode, dev.ifindex, dir, 0};
    fl_attach_val val{};
    val.mode = want;
    val.prog_id = prog_id_of(prog);
    std::strncpy(val.ifname, dev.name.c_str(), sizeof(val.ifname) - 1);
    std::strncpy(val.netns_path, ns.path.c_str(), sizeof(val.netns_path) - 1);
    if (ns.path == "/proc/self/ns/net") std::strncpy(val.netns_path, "host", sizeof(val.netns_path) - 1);
    const std::string dir_name = dir == FL_DIR_EGRESS ? "egress" : "ingress";

    if (want == FL_ATTACH_TCX) {
      int link = bpf_link_create(prog, static_cast<int>(dev.ifindex),
                                 dir == FL_DIR_EGRESS ? kBpfTcxEgress : kBpfTcxIngress, nullptr);
      if (link < 0) return errno_error("cannot attach a TCX " + dir_name + " link to " + dev.name);
      UniqueFd link_fd(link);
      if (bpf_obj_pin(link, link_pin(key).c_str()) != 0)
        return errno_error("cannot pin the TCX link of " + dev.name + " at " + link_pin(key));
      val.link_id = link_id_of(link);
    } else {
      LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = static_cast<int>(dev.ifindex), .attach_point = tc_point(dir));
      int err = bpf_tc_hook_create(&hook);
      if (err != 0 && err != -EEXIST) return make_error(err, "cannot create clsact on " + dev.name);
      // A clsact we created is removed with our last filter, never one we found.
      fl_attach_key other{ns.inode, dev.ifindex,
                          dir == FL_DIR_EGRESS ? uint32_t{FL_DIR_INGRESS} : uint32_t{FL_DIR_EGRESS}, 0};
      fl_attach_val other_val{};
      bool sibling = bpf_map_lookup_elem(maps_.attach(), &other, &other_val) == 0;
      val.created_clsact = err == 0 || (sibling && other_val.created_clsact) ? 1 : 0;
      LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog, .handle = kTcHandle, .priority = kTcPriority);
      err = bpf_tc_attach(&hook, &opts);
      if (err != 0) return make_error(err, "cannot attach the tc " + dir_name + " filter to " + dev.name);
    }
    if (bpf_map_update_elem(maps_.attach(), &key, &val, BPF_ANY) != 0)
      return errno_error("cannot record the attachment on " + dev.name);
  }
  return want;
}

Status NetfaultAttachments::detach(const AttachmentRecord& rec) {
  if (rec.val.mode == FL_ATTACH_TCX) {
    std::string pin = link_pin(rec.key);
    int fd = bpf_obj_get(pin.c_str());
    if (fd >= 0) {
      bpf_link_detach(fd);  // fails harmlessly if the device is already gone
      ::close(fd);
    }
    ::unlink(pin.c_str());
  } else {
    std::string path = rec.val.netns_path;
    NetnsRef ns;
    ns.path = path == "host" ? "/proc/self/ns/net" : path;
    ns.display = path;
    if (::access(ns.path.c_str(), F_OK) == 0) {
      auto inside = NetnsEnter::enter(ns);
      if (inside) {
        bool last_of_clsact = rec.val.created_clsact != 0;
        fl_attach_key other = rec.key;
        other.dir = rec.key.dir == FL_DIR_EGRESS ? FL_DIR_INGRESS : FL_DIR_EGRESS;
        fl_attach_val ov{};
        if (bpf_map_lookup_elem(maps_.attach(), &other, &ov) == 0) last_of_clsact = false;
        FL_TRY(detach_tc_filter(rec.key.ifindex, rec.key.dir, last_of_clsact));
      }
    }
  }
  bpf_map_delete_elem(maps_.attach(), &rec.key);
  return {};
}

Status NetfaultAttachments::detach_all(uint32_t netns_ino) {
  Status first;
  for (const auto& rec : list()) {
    if (netns_ino != 0 && rec.key.netns_ino != netns_ino) continue;
    auto st = detach(rec);
    if (!st && first.ok()) first = st;
  }
  return first;
}

Result<int> NetfaultAttachments::reconcile_orphans(bool foreign_too) {
  int fixed = 0;
  bpf_map_info mine{};
  uint32_t mine_len = sizeof(mine);
  if (bpf_obj_get_info_by_fd(maps_.control(), &mine, &mine_len) != 0) return errno_error("cannot read our control map");
  // Ours: a netfault program bound to our control map; foreign: bound to another
  // (a state whose pins were lost, or another FAULTLINE_BPFFS_ROOT).
  auto orphan = [&](uint32_t prog_id) {
    auto ctl = netfault_control_map(prog_id);
    return ctl.has_value() && (*ctl == mine.id || foreign_too);
  };
  std::vector<uint32_t> known_links;
  for (const auto& r : list()) known_links.push_back(r.val.link_id);
  // TCX (and any other) links whose program is ours but whose record is gone.
  for (uint32_t id = 0; bpf_link_get_next_id(id, &id) == 0;) {
    int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0) continue;
    bpf_link_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && orphan(info.prog_id) &&
        std::find(known_links.begin(), known_links.end(), id) == known_links.end()) {
      if (bpf_link_detach(fd) == 0) ++fixed;
    }
    ::close(fd);
  }
  // tc filters with our handle on the devices of the host and named namespaces.
  std::vector<std::string> spaces = {"/proc/self/ns/net"};
  if (DIR* d = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') spaces.push_back(std::string("/run/netns/") + e->d_name);
    }
    ::closedir(d);
  }
  for (const auto& path : spaces) {
    auto ref = resolve_netns(path);
    if (!ref) continue;
    auto inside = NetnsEnter::enter(*ref);
    if (!inside) continue;
    auto devs = list_devices();
    if (!devs) continue;
    for (const auto& dev : *devs) {
      for (uint32_t dir : {uint32_t{FL_DIR_EGRESS}, uint32_t{FL_DIR_INGRESS}}) {
        fl_attach_key key{ref->inode, dev.ifindex, dir, 0};
        fl_attach_val val{};
        if (bpf_map_lookup_elem(maps_.attach(), &key, &val) == 0) continue;
        LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = static_cast<int>(dev.ifindex), .attach_point = tc_point(dir));
        LIBBPF_OPTS(bpf_tc_opts, q, .handle = kTcHandle, .priority = kTcPriority);
        if (bpf_tc_query(&hook, &q) == 0 && orphan(q.prog_id)) {
          LIBBPF_OPTS(bpf_tc_opts, d2, .handle = kTcHandle, .priority = kTcPriority);
          if (bpf_tc_detach(&hook, &d2) == 0) ++fixed;
        }
      }
    }
  }
  return fixed;
}

Status prepare_netfault_programs(const BpffsLayout& layout, const NetfaultMaps& maps, const NetnsRef& ns) {
  const auto& f = packet_features();
  const uint32_t mode = f.tcx.available ? FL_ATTACH_TCX : f.clsact.available ? FL_ATTACH_TC : 0;
  if (mode == 0)
    return make_error(ENOTSUP,
                      "no way to attach packet programs: TCX (" + f.tcx.detail + "), clsact (" + f.clsact.detail + ")");
  if (prepared_for(layout, maps, ns.inode, egress_drop_of(mode)) != nullptr) return {};
  auto obj = NetfaultObject::load(layout, ns.inode, egress_drop_of(mode), FL_DIR_EGRESS | FL_DIR_INGRESS);
  if (!obj) return obj.error();
  std::lock_guard<std::mutex> hold(g_prepared_mu);
  g_prepared.emplace(PreparedPrograms{layout.root, ns.inode, egress_drop_of(mode), std::move(*obj)});
  return {};
}

bool netfault_programs_prepared(const BpffsLayout& layout, const NetfaultMaps& maps, const NetnsRef& ns) {
  const auto& f = packet_features();
  const uint32_t mode = f.tcx.available ? FL_ATTACH_TCX : FL_ATTACH_TC;
  return prepared_for(layout, maps, ns.inode, egress_drop_of(mode)) != nullptr;
}

}  // namespace faultline
