// Reads the pinned maps and the session records for a scrape. Nothing here
// writes: a scrape never reaps, ends or changes a fault.
#include "userspace/daemon/metrics.h"

#include <bpf/bpf.h>

#include <nlohmann/json.hpp>

#include "base/unique_fd.h"
#include "loader/netfault_maps.h"
#include "userspace/daemon/metrics_text.h"
#include "userspace/daemon/proxy_faults.h"
#include "userspace/faults/packet/fault_table.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/state/session_registry.h"

namespace faultline {
namespace {

// The entries in a hash or LPM map, counted by walking its keys.
uint64_t count_keys(int fd, uint32_t key_size) {
  std::vector<unsigned char> key(key_size), next(key_size);
  uint64_t n = 0;
  void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, next.data()) == 0) {
    ++n;
    key.swap(next);
    prev = key.data();
  }
  return n;
}

struct MapFill {
  std::string name;
  uint64_t entries = 0;
  uint64_t max_entries = 0;
};

std::vector<MapFill> map_fill(const NetfaultMaps& maps, size_t fault_slots_used) {
  std::vector<MapFill> out;
  const std::pair<const char*, int> keyed[] = {
      {"fl_exact", maps.exact()}, {"fl_prefix", maps.prefix()}, {"fl_dns", maps.dns()}, {"fl_attach", maps.attach()}};
  for (const auto& [name, fd] : keyed) {
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) != 0) continue;
    out.push_back(MapFill{name, count_keys(fd, info.key_size), info.max_entries});
  }
  // fl_faults is an array: its fill is the slots holding a fault.
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (maps.faults() >= 0 && bpf_obj_get_info_by_fd(maps.faults(), &info, &len) == 0)
    out.push_back(MapFill{"fl_faults", fault_slots_used, info.max_entries});
  return out;
}

void packet_metrics(MetricsText& m) {
  NetfaultEngine engine;
  auto maps = NetfaultMaps::open(engine.layout(), false);
  m.family("faultline_installed", "gauge", "1 when the packet fault maps are pinned (Faultline is installed)");
  m.sample({}, maps.ok() ? 1 : 0);
  if (!maps) return;
  uint32_t zero = 0;
  fl_control ctl{};
  const bool armed = bpf_map_lookup_elem(maps->control(), &zero, &ctl) == 0 && ctl.armed != 0;
  m.family("faultline_armed", "gauge", "1 while the programs act on faults, 0 once the kill switch is engaged");
  m.sample({}, armed ? 1 : 0);

  FaultTable table(*maps);
  const std::vector<FaultRow> rows = table.list();
  struct Counter {
    const char* name;
    const char* help;
    __u64 fl_fault_stats::*field;
  };
  static constexpr Counter kCounters[] = {
      {"faultline_packet_fault_matched_packets_total", "Packets that matched the fault's scope",
       &fl_fault_stats::matched},
      {"faultline_packet_fault_dropped_packets_total", "Packets the fault dropped", &fl_fault_stats::dropped},
      {"faultline_packet_fault_corrupted_packets_total", "Packets the fault corrupted", &fl_fault_stats::corrupted},
      {"faultline_packet_fault_duplicated_packets_total", "Packets the fault duplicated", &fl_fault_stats::duplicated},
      {"faultline_packet_fault_delayed_packets_total", "Packets the fault delayed", &fl_fault_stats::delayed},
      {"faultline_packet_fault_matched_bytes_total", "Bytes of the packets that matched the fault's scope",
       &fl_fault_stats::bytes},
  };
  auto labels = [](const FaultRow& r) {
    nlohmann::json spec = nlohmann::json::parse(r.meta.spec, nullptr, false);
    std::string kind = spec.is_object() && spec.contains("kind") && spec["kind"].is_string()
                           ? spec["kind"].get<std::string>()
                           : "unknown";
    return MetricLabels{{"fault", std::to_string(r.slot)}, {"kind", kind}};
  };
  for (const auto& c : kCounters) {
    m.family(c.name, "counter", c.help);
    for (const auto& r : rows) m.sample(labels(r), r.stats.*c.field);
  }
  const std::vector<uint64_t> reasons = table.drop_reasons();
  m.family("faultline_packet_dropped_packets_total", "counter", "Packets dropped by every fault, by reason");
  for (uint32_t i = 1; i < reasons.size(); ++i) m.sample({{"reason", drop_reason_name(i)}}, reasons[i]);

  const auto fill = map_fill(*maps, rows.size());
  m.family("faultline_map_entries", "gauge", "Entries in a pinned BPF map that has a size limit");
  for (const auto& f : fill) m.sample({{"map", f.name}}, f.entries);
  m.family("faultline_map_max_entries", "gauge", "The size limit of a pinned BPF map");
  for (const auto& f : fill) m.sample({{"map", f.name}}, f.max_entries);
}

uint64_t counter_value(const nlohmann::json& c, const char* key) {
  return c.contains(key) && c[key].is_number_unsigned() ? c[key].get<uint64_t>() : 0;
}

void session_metrics(MetricsText& m) {
  std::vector<Session> sessions;
  if (auto reg = SessionRegistry::open(false)) sessions = reg->list();
  std::vector<std::pair<const Session*, nlohmann::json>> counted;
  for (const auto& s : sessions) counted.emplace_back(&s, session_counters(s));

  m.family("faultline_syscall_fault_calls_total", "counter",
           "Calls a syscall fault saw, by result (failed: the errno was injected)");
  for (const auto& [s, c] : counted) {
    if (s->kind != "syscall") continue;
    for (const char* result : {"failed", "passed"}) {
      if (c.contains(result))
        m.sample({{"fault", s->id}, {"mechanism", s->mechanism}, {"result", result}}, counter_value(c, result));
    }
  }
  m.family("faultline_syscall_fault_cap_spared_calls_total", "counter",
           "Calls a capped syscall fault spared once its cap was reached");
  for (const auto& [s, c] : counted) {
    if (s->kind == "syscall" && c.contains("cap_spared"))
      m.sample({{"fault", s->id}, {"mechanism", s->mechanism}}, counter_value(c, "cap_spared"));
  }
  m.family("faultline_guard_decisions_total", "counter", "Decisions a guard's egress policy made, by decision");
  for (const auto& [s, c] : counted) {
    if (s->kind != "guard") continue;
    for (const char* d : {"allowed", "denied", "would_deny", "exfil_dropped", "redirected"}) {
      if (c.contains(d)) m.sample({{"guard", s->id}, {"decision", d}}, counter_value(c, d));
    }
  }
}

}  // namespace

std::string collect_metrics(const ProxyFaults* proxies) {
  MetricsText m;
  packet_metrics(m);
  session_metrics(m);
  if (proxies != nullptr) proxies->append_metrics(m);
  return m.text();
}

}  // namespace faultline
