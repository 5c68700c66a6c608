// NetfaultEngine: the life cycle of packet faults, under the state lock.
#include "userspace/faults/packet/netfault_engine.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "base/cgroup.h"
#include "base/process.h"
#include "loader/features.h"
#include "loader/rtnetlink.h"
#include "userspace/faults/capabilities.h"
#include "userspace/faults/packet/distributions.h"

namespace faultline {
namespace {

// Set in a resident process (faultd): see NetfaultEngine::keep_idle_state().
std::atomic<bool> g_keep_idle_state{false};

Result<uint64_t> resolve_cgroup(const std::string& path) {
  auto dir = resolve_cgroup_v2_dir(path, "--cgroup");
  if (!dir) return dir.error();
  struct stat st {};
  if (::stat(dir->c_str(), &st) != 0) return errno_error("--cgroup " + path + ": cannot stat " + *dir);
  return static_cast<uint64_t>(st.st_ino);  // the cgroup id bpf_skb_cgroup_id() reports
}

}  // namespace

CompiledFault compile_fault(const FaultSpec& s, uint32_t netns_ino, uint32_t ifindex, uint64_t cgroup_id) {
  CompiledFault c;
  fl_fault& f = c.entry;
  f.kind = static_cast<uint8_t>(s.kind);
  f.netns_ino = netns_ino;
  f.ifindex = ifindex;
  f.dir_mask = s.dir_mask;
  f.proto = s.proto;
  f.port_lo = s.ports.lo;
  f.port_hi = s.ports.hi;
  f.cgroup_id = cgroup_id;
  switch (s.kind) {
    case FaultKind::Partition:
    case FaultKind::Flowdrop:
      f.prob = 0xFFFFFFFFU;
      break;
    default:
      f.prob = percent_to_prob(s.percent);
      break;
  }
  f.correlation = percent_to_prob(s.correlation);
  if (s.ge) {
    f.loss_model = FL_LOSS_GE;
    f.ge_p = percent_to_prob(s.ge->p);
    f.ge_r = percent_to_prob(s.ge->r);
    f.ge_loss_bad = percent_to_prob(s.ge->loss_bad);
    f.ge_loss_good = percent_to_prob(s.ge->loss_good);
  }
  f.delay_ns = s.delay_ns;
  f.jitter_ns = s.jitter_ns;
  f.dist = s.dist;
  f.rate_bps = s.rate_bps;
  if (s.source) {
    f.flags |= FL_F_MATCH_LOCAL;
    f.local_addr = s.source->addr;
    f.local_mask = s.source->mask();
  }
  if (s.max_injections || s.start_after_ns) {
    f.flags |= FL_F_BUDGET;
    c.budget.max = s.max_injections;
  }
  if (s.seed) {
    f.flags |= FL_F_SEEDED;
    c.seed = *s.seed;
  }
  if (s.kind == FaultKind::Dns) {
    for (const auto& d : s.domains) c.dns.push_back(dns_key_for(d));
    if (!s.targets.empty()) {
      f.flags |= FL_F_MATCH_REMOTE;
      f.remote_addr = s.targets[0].addr;
      f.remote_mask = s.targets[0].mask();
    }
    return c;
  }
  if (s.targets.empty()) {
    c.prefixes.push_back(Prefix{});  // ::/0 covers every IPv4-mapped and IPv6 address
  }
  for (const auto& t : s.targets) (t.exact() ? c.exact : c.prefixes).push_back(t);
  return c;
}

namespace {

// One namespace runs one attach mode: asking for the other is refused, and the
// operator is told how to free the namespace.
Status check_mode_free(const NetfaultAttachments& att, const FaultPlan& plan) {
  const uint32_t want = attach_mode_value(plan.requested);
  const uint32_t in_use = att.mode_in_use(plan.netns, plan.devices, plan.spec.dir_mask);
  if (want == 0 || in_use == 0 || want == in_use) return {};
  return make_error(EBUSY, std::string("--attach ") + attach_mode_name(want) + ": namespace " + plan.netns.display +
                               " already has Faultline attached with " + attach_mode_name(in_use) +
                               "; end its faults first (faultctl abort --all)");
}

// Makes fq the root qdisc of every planned device that lacks it; returns the
// ifindexes it was installed on, whose attachments then remember to remove it.
Result<std::vector<uint32_t>> install_fq_if_needed(const FaultPlan& plan) {
  auto inside = NetnsEnter::enter(plan.netns);
  if (!inside) return inside.error();
  std::vector<uint32_t> installed;
  for (const auto& d : plan.devices) {
    auto q = root_qdisc(d.ifindex);
    if (!q) return q.error();
    if (q->has_value() && (*q)->kind == "fq") continue;
    if (q->has_value() && (*q)->handle != 0) {
      return make_error(EBUSY, "device " + d.name + " has root qdisc " + (*q)->kind +
                                   " set by someone else; EDT delay needs fq there, and Faultline will not replace it");
    }
    FL_TRY(replace_root_qdisc(d.ifindex, "fq"));
    installed.push_back(d.ifindex);
  }
  return installed;
}

// A cap or a delayed start lives in fl_budget, which programs attached by an
// older faultctl (state pinned before the map existed) never read: on them the
// fault would inject without a cap, or at once. Each program that can serve the
// fault must reference the map, as the kernel reports it.
Status check_budget_readers(const NetfaultAttachments& att, const NetfaultMaps& maps, const FaultPlan& plan) {
  const uint32_t ifindex = plan.compiled.entry.ifindex;
  for (const auto& rec : att.list()) {
    if (rec.key.netns_ino != plan.netns.inode || !(rec.key.dir & plan.spec.dir_mask)) continue;
    if (ifindex != 0 && rec.key.ifindex != ifindex) continue;
    if (prog_uses_map(rec.val.prog_id, maps.budget())) continue;
    const char* flag = plan.spec.max_injections ? "--max-injections" : "--start-after";
    return make_error(EOPNOTSUPP, std::string(flag) + ": the program on " + rec.val.ifname + " in netns " +
                                      plan.netns.display +
                                      " was attached by an older faultctl and cannot hold a fault back; end the "
                                      "faults running there first (faultctl abort --all)");
  }
  return {};
}

// A seeded fault's generator lives in fl_rng, which programs attached by an
// older faultctl never read: they would draw from bpf_get_prandom_u32, and the
// printed seed would replay nothing. Every fault with a random decision is
// seeded (a drawn seed when none is given), so such a fault is refused there.
Status check_rng_readers(const NetfaultAttachments& att, const NetfaultMaps& maps, const FaultPlan& plan) {
  const uint32_t ifindex = plan.compiled.entry.ifindex;
  for (const auto& rec : att.list()) {
    if (rec.key.netns_ino != plan.netns.inode || !(rec.key.dir & plan.spec.dir_mask)) continue;
    if (ifindex != 0 && rec.key.ifindex != ifindex) continue;
    if (prog_uses_map(rec.val.prog_id, maps.rng())) continue;
    return make_error(EOPNOTSUPP, "--seed " + std::to_string(plan.compiled.seed) +
                                      (plan.spec.seed_drawn ? " (drawn)" : "") + ": the program on " + rec.val.ifname +
                                      " in netns " + plan.netns.display +
                                      " was attached by an older faultctl and cannot draw from a seed, so this "
                                      "fault could not be replayed; end the faults running there first (faultctl "
                                      "abort --all)");
  }
  return {};
}

}  // namespace

nlohmann::json FaultPlan::to_json() const {
  nlohmann::json j = spec.to_json();
  j["netns_path"] = netns.path;
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(d.name);
  j["devices"] = names;
  j["device_choice"] = device_choice;
  if (!routes.empty()) {
    j["routes"] = routes_json(routes, devices);
    if (routes.size() > 8) j["routes_total"] = routes.size();
  }
  j["mechanism"] = mechanism;
  j["index"] = {
      {"exact", compiled.exact.size()}, {"prefixes", compiled.prefixes.size()}, {"domains", compiled.dns.size()}};
  return j;
}

Status initialise_maps(const NetfaultMaps& maps) {
  uint32_t zero = 0;
  fl_control ctl{};
  ctl.armed = 1;
  ctl.dup_mark = FL_DEFAULT_DUP_MARK;
  // Maps just created: every index is empty and the filter all zero, so every
  // skip holds (a rebuild would walk the 1M buckets of fl_exact for nothing).
  ctl.index = FL_IDX_EXACT_FILTER | FL_IDX_NO_PREFIX | FL_IDX_NO_DNS;
  if (bpf_map_update_elem(maps.control(), &zero, &ctl, BPF_ANY) != 0) return errno_error("cannot arm the control map");
  for (uint32_t d = 0; d < FL_DIST_MAX; ++d) {
    fl_dist_table t = make_dist_table(d);
    if (bpf_map_update_elem(maps.dist(), &d, &t, BPF_ANY) != 0) return errno_error("cannot write distribution tables");
  }
  return {};
}

Result<FaultPlan> NetfaultEngine::plan(const FaultSpec& spec, AttachMode mode) const {
  if (auto v = validate(spec); !v) return as_bad_input(v.error());
  FaultPlan p;
  p.spec = spec;
  p.requested = mode;
  auto ns = resolve_netns(spec.netns);
  if (!ns) return as_bad_input(ns.error());
  p.netns = *ns;
  {
    auto inside = NetnsEnter::enter(p.netns);
    if (!inside) return inside.error();
    auto devs = list_devices();
    if (!devs) return devs.error();
    if (spec.dev.empty() && targets_are_routed(spec.targets)) {
      // Where the targets' packets go: lo for this host's own addresses, the
      // egress device otherwise. Nothing is attached where none can pass.
      auto routes = route_targets(spec.targets, p.netns.display);
      if (!routes) return routes.error();
      auto chosen = devices_for_routes(*devs, *routes);
      if (!chosen) return chosen.error();
      p.routes = std::move(*routes);
      p.devices = std::move(*chosen);
      p.device_choice = "routes";
    } else {
      p.device_choice = spec.dev.empty() ? "every non-loopback Ethernet device" : "--dev";
      for (const auto& d : *devs) {
        if (!spec.dev.empty() && d.name != spec.dev) continue;
        if (spec.dev.empty() && (d.loopback || !d.ethernet)) continue;
        if (!d.ethernet && !d.loopback)
          return make_error(ENOTSUP,
                            "--dev " + d.name + ": not an Ethernet device; the packet parser expects Ethernet framing");
        p.devices.push_back(d);
      }
    }
  }
  if (p.devices.empty()) {
    if (!spec.dev.empty())
      return input_error(ENODEV, "--dev " + spec.dev + ": no such device in netns " + p.netns.display);
    return input_error(ENODEV, "netns " + p.netns.display + " has no non-loopback Ethernet device to attach to");
  }
  if (!spec.cgroup.empty()) {
    auto id = resolve_cgroup(spec.cgroup);
    if (!id) return as_bad_input(id.error());
    p.cgroup_id = *id;
  }
  // Capabilities, after every input check.
  const auto& f = packet_features();
  auto caps = capabilities(f);
  if (caps[0].chosen.empty()) return make_error(ENOTSUP, "packet faults are not possible here: " + caps[0].why);
  if (mode == AttachMode::Tcx && !f.tcx.available) return make_error(ENOTSUP, "--attach tcx: " + f.tcx.detail);
  if (mode == AttachMode::Tc && !f.clsact.available) return make_error(ENOTSUP, "--attach tc: " + f.clsact.detail);
  p.mechanism = mode == AttachMode::Tc ? "tc clsact + cls_bpf" : mode == AttachMode::Tcx ? "tcx" : caps[0].chosen;
  if (spec.kind == FaultKind::Latency || spec.kind == FaultKind::Bandwidth) {
    if (!f.sch_fq.available)
      return make_error(ENOTSUP, std::string(kind_name(spec.kind)) +
                                     " needs the fq qdisc (sch_fq) for EDT pacing, and this kernel has none (" +
                                     f.sch_fq.detail + "); --via proxy delays or paces TCP streams instead");
    p.mechanism += " + EDT on fq";
  }
  p.compiled = compile_fault(spec, p.netns.inode, spec.dev.empty() ? 0 : p.devices.front().ifindex, p.cgroup_id);
  return p;
}

Result<int> NetfaultEngine::reap_locked(NetfaultMaps& maps) {
  FaultTable table(maps);
  uint64_t now = boottime_ns();
  int reaped = 0;
  for (const auto& row : table.list()) {
    bool expired = row.fault.expires_ns != 0 ? row.fault.expires_ns <= now : row.meta.expires_ns <= now;
    bool owner_gone = row.meta.owner_pid == 0 || process_start_time(row.meta.owner_pid) != row.meta.owner_start;
    // A fault whose owner died mid-apply (still inactive) is garbage too.
    bool orphan_inactive = row.fault.expires_ns == 0 && owner_gone;
    if (expired || orphan_inactive) {
      FL_TRY(table.remove(row.slot));
      ++reaped;
    }
  }
  return reaped;
}

Status NetfaultEngine::teardown_locked(NetfaultMaps& maps, bool foreign_too) {
  NetfaultAttachments att(layout_, maps);
  // Undo fq we installed before the attachments that remember it disappear.
  for (const auto& rec : att.list()) {
    if (!rec.val.created_fq) continue;
    NetnsRef ns;
    ns.path = std::string(rec.val.netns_path) == "host" ? "/proc/self/ns/net" : rec.val.netns_path;
    ns.display = rec.val.netns_path;
    if (auto in = NetnsEnter::enter(ns)) (void)delete_root_qdisc(rec.key.ifindex);
  }
  Status st = att.detach_all();
  if (auto orphans = att.reconcile_orphans(foreign_too); !orphans && st.ok()) st = orphans.error();
  if (DIR* d = ::opendir(layout_.links().c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') ::unlink((layout_.links() + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  for (const auto& name : NetfaultMaps::names()) ::unlink(layout_.map(name).c_str());
  for (const auto& name : NetfaultMaps::retired_names()) ::unlink(layout_.map(name).c_str());
  remove_bpffs_dirs(layout_);
  NetfaultMaps::forget_kept(layout_);  // the maps go with their pins, not with a resident's fds
  return st;
}

Result<NetfaultMaps> NetfaultEngine::open_maps_locked() {
  auto maps = NetfaultMaps::open(layout_, true);
  if (!maps) return maps.error();
  if (maps->created()) {
    FL_TRY(initialise_maps(*maps));
    // A fresh state: programs still attached from an earlier one whose pins were
    // lost are found by asking the kernel. Only the default root sweeps others'
    // programs; a test's private root must not touch a neighbour's.
    NetfaultAttachments fresh(layout_, *maps);
    (void)fresh.reconcile_orphans(layout_.root == BpffsLayout{}.root);
  }
  return maps;
}

Result<AppliedFault> NetfaultEngine::apply(const FaultPlan& plan, uint32_t owner_pid) {
  auto lock = NetfaultStateLock::acquire(layout_);
  if (!lock) return lock.error();
  auto maps = open_maps_locked();
  if (!maps) return maps.error();
  FL_TRY(reap_locked(*maps));
  // An idle state kept by a resident process must not refuse what a torn-down
  // one would take: another attach mode in a namespace it had attached.
  if (g_keep_idle_state && plan.requested != AttachMode::Auto && FaultTable(*maps).list().empty()) {
    NetfaultAttachments idle(layout_, *maps);
    const uint32_t in_use = idle.mode_in_use(plan.netns, plan.devices, plan.spec.dir_mask);
    if (in_use != 0 && in_use != attach_mode_value(plan.requested)) FL_TRY(idle.detach_all(plan.netns.inode));
  }

  std::vector<uint32_t> fq_installed;
  if (plan.spec.kind == FaultKind::Latency || plan.spec.kind == FaultKind::Bandwidth) {
    auto installed = install_fq_if_needed(plan);
    if (!installed) return installed.error();
    fq_installed = std::move(*installed);
  }

  NetfaultAttachments att(layout_, *maps);
  auto mode = [&]() -> Result<uint32_t> {
    FL_TRY(check_mode_free(att, plan));
    return att.ensure(plan.netns, plan.devices, plan.spec.dir_mask, plan.requested);
  }();
  if (!mode) {
    if (FaultTable(*maps).list().empty()) (void)teardown_locked(*maps);
    return mode.error();
  }
  for (uint32_t ifindex : fq_installed) {
    fl_attach_key k{plan.netns.inode, ifindex, FL_DIR_EGRESS, 0};
    fl_attach_val v{};
    if (bpf_map_lookup_elem(maps->attach(), &k, &v) == 0) {
      v.created_fq = 1;
      bpf_map_update_elem(maps->attach(), &k, &v, BPF_EXIST);
    }
  }

  if (plan.compiled.entry.flags & FL_F_BUDGET) {
    if (auto st = check_budget_readers(att, *maps, plan); !st) {
      if (FaultTable(*maps).list().empty()) (void)teardown_locked(*maps);
      return st.error();
    }
  }
  if (plan.compiled.entry.flags & FL_F_SEEDED) {
    if (auto st = check_rng_readers(att, *maps, plan); !st) {
      if (FaultTable(*maps).list().empty()) (void)teardown_locked(*maps);
      return st.error();
    }
  }

  FaultTable table(*maps);
  auto slot = table.allocate_slot();
  if (!slot) return slot.error();
  CompiledFault c = plan.compiled;
  uint64_t now = boottime_ns();
  c.entry.expires_ns = now + plan.spec.duration_ns;
  if (plan.spec.start_after_ns) c.budget.start_ns = now + plan.spec.start_after_ns;
  fl_meta meta{};
  meta.created_ns = now;
  meta.expires_ns = c.entry.expires_ns;
  meta.owner_pid = owner_pid;
  meta.owner_start = process_start_time(owner_pid);
  nlohmann::json j = plan.spec.to_json();
  j["mechanism"] = attach_mode_name(*mode);
  std::string text = j.dump();
  if (text.size() >= sizeof(meta.spec)) {
    j.erase("targets");
    j.erase("domains");
    text = j.dump();
  }
  std::strncpy(meta.spec, text.c_str(), sizeof(meta.spec) - 1);
  auto st = table.add(*slot, c, meta);
  if (!st) {
    if (table.list().empty()) (void)teardown_locked(*maps);
    return st.error();
  }
  return AppliedFault{*slot, c.entry.expires_ns, attach_mode_name(*mode)};
}

void NetfaultEngine::keep_idle_state(bool keep) {
  g_keep_idle_state = keep;
  // A resident process also keeps the pinned maps open between its calls.
  NetfaultMaps::keep_open(keep);
}

Result<uint64_t> NetfaultEngine::prepare_host() {
  const uint64_t start = monotonic_ns();
  auto ns = resolve_netns("");
  if (!ns) return ns.error();
  auto lock = NetfaultStateLock::acquire(layout_);
  if (!lock) return lock.error();
  auto maps = open_maps_locked();
  if (!maps) return maps.error();
  FL_TRY(prepare_netfault_programs(layout_, *maps, *ns));
  return (monotonic_ns() - start) / 1'000'000;
}

Status NetfaultEngine::end(uint32_t slot) {
  auto lock = NetfaultStateLock::acquire(layout_);
  if (!lock) return lock.error();
  auto maps = NetfaultMaps::open(layout_, false);
  if (!maps) return {};  // already uninstalled: nothing left to end
  FaultTable table(*maps);
  FL_TRY(table.remove(slot));
  FL_TRY(reap_locked(*maps));
  if (table.list().empty() && !g_keep_idle_state) return teardown_locked(*maps);
  return {};
}

Status NetfaultEngine::abort_all() {
  auto lock = NetfaultStateLock::acquire(layout_);
  if (!lock) return lock.error();
  auto maps = NetfaultMaps::open(layout_, false);
  if (!maps) return {};
  uint32_t zero = 0;
  fl_control ctl{};
  bpf_map_lookup_elem(maps->control(), &zero, &ctl);
  ctl.armed = 0;  // the kill switch: from here every program passes every packet
  if (bpf_map_update_elem(maps->control(), &zero, &ctl, BPF_ANY) != 0)
    return errno_error("cannot flip the kill switch");
  FaultTable table(*maps);
  for (const auto& row : table.list()) FL_TRY(table.remove(row.slot));
  return teardown_locked(*maps);
}

Result<int> NetfaultEngine::reap() {
  struct stat st {};
  if (::stat(layout_.map("fl_meta").c_str(), &st) != 0) return 0;
  auto lock = NetfaultStateLock::acquire(layout_);
  if (!lock) return lock.error();
  auto maps = NetfaultMaps::open(layout_, false);
  if (!maps) return 0;
  auto reaped = reap_locked(*maps);
  if (!reaped) return reaped.error();
  if (FaultTable(*maps).list().empty() && !g_keep_idle_state) FL_TRY(teardown_locked(*maps));
  return *reaped;
}

Status NetfaultEngine::uninstall() {
  auto lock = NetfaultStateLock::acquire(layout_);
  if (!lock) return lock.error();
  auto maps = NetfaultMaps::open(layout_, true);
  if (!maps) return maps.error();
  uint32_t zero = 0;
  fl_control ctl{};
  bpf_map_update_elem(maps->control(), &zero, &ctl, BPF_ANY);  // disarm first
  FaultTable table(*maps);
  for (const auto& row : table.list()) (void)table.remove(row.slot);
  // Other states' programs are swept only from the default root: a test's
  // private root must never detach a neighbour's (or a real install's).
  return teardown_locked(*maps, layout_.root == BpffsLayout{}.root);
}

}  // namespace faultline
