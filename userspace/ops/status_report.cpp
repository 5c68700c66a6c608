// The status of every family (packet faults, resource faults, syscall faults,
// guards), as text or one JSON document: what faultctl status prints and what
// faultd's GET /v1/status answers.
#include "userspace/ops/status_report.h"

#include <bpf/bpf.h>

#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "base/clock.h"
#include "base/exit_code.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/ops/resource_state.h"
#include "userspace/ops/session_state.h"
#include "userspace/policy/policy_apply.h"

namespace faultline {

int write_status(bool json, std::ostream& out) {
  NetfaultEngine engine;
  (void)engine.reap();  // expired faults of dead owners go first
  auto maps = NetfaultMaps::open(engine.layout(), false);
  std::vector<FaultRow> rows;
  std::vector<uint64_t> reasons;
  uint32_t armed = 0;
  if (maps) {
    FaultTable table(*maps);
    rows = table.list();
    reasons = table.drop_reasons();
    uint32_t zero = 0;
    fl_control ctl{};
    if (bpf_map_lookup_elem(maps->control(), &zero, &ctl) == 0) armed = ctl.armed;
  }
  uint64_t now = boottime_ns();
  const std::vector<std::string> applied = applied_policy_lines(engine.layout());
  auto print_applied = [&] {
    if (applied.empty()) return false;
    out << "applied egress policy (faultctl policy export shows it):\n";
    for (const auto& l : applied) out << "  " << l << "\n";
    return true;
  };
  if (json) {
    nlohmann::json doc;
    doc["installed"] = maps.ok();
    doc["armed"] = armed != 0;
    doc["faults"] = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json f = nlohmann::json::parse(r.meta.spec, nullptr, false);
      if (f.is_discarded()) f = nlohmann::json::object();
      f["id"] = r.slot;
      f["active"] = r.fault.expires_ns > now;
      f["left_s"] = r.fault.expires_ns > now ? (r.fault.expires_ns - now) / 1'000'000'000ULL : 0;
      f["owner_pid"] = r.meta.owner_pid;
      f["counters"] = {{"matched", r.stats.matched},     {"dropped", r.stats.dropped},
                       {"corrupted", r.stats.corrupted}, {"duplicated", r.stats.duplicated},
                       {"delayed", r.stats.delayed},     {"bytes", r.stats.bytes}};
      if (r.budget.max) f["cap"] = cap_json(r.budget, now);
      if (r.seed) f["seed"] = std::to_string(*r.seed);  // a string, as in the record
      if (r.budget.start_ns > now) f["starts_in_s"] = (r.budget.start_ns - now + 999'999'999ULL) / 1'000'000'000ULL;
      doc["faults"].push_back(f);
    }
    nlohmann::json rj = nlohmann::json::object();
    for (uint32_t i = 1; i < reasons.size(); ++i) rj[drop_reason_name(i)] = reasons[i];
    doc["drop_reasons"] = rj;
    doc["resource_faults"] = resource_status_json();
    nlohmann::json sessions = session_status_json();
    doc["syscall_faults"] = sessions["syscall_faults"];
    doc["tcp_faults"] = sessions["tcp_faults"];
    doc["guards"] = sessions["guards"];
    doc["applied_policy"] = applied;
    out << doc.dump() << "\n";
    return kExitCompleted;
  }
  if (rows.empty()) {
    bool any = false;
    if (has_resource_faults()) {
      print_resource_status(out);
      any = true;
    }
    if (any) out << "\n";
    if (!print_session_status(out) && !any && applied.empty())
      out << "no active faults" << (maps ? "" : " (nothing installed)") << "\n";
    (void)print_applied();
    return kExitCompleted;
  }
  out << std::left << std::setw(5) << "ID" << std::setw(11) << "KIND" << std::setw(8) << "LEFT" << std::setw(11)
      << "MATCHED" << std::setw(11) << "DROPPED" << std::setw(11) << "ALTERED"
      << "SCOPE\n";
  for (const auto& r : rows) {
    nlohmann::json f = nlohmann::json::parse(r.meta.spec, nullptr, false);
    std::string kind = f.is_object() ? f.value("kind", "?") : "?";
    std::string left =
        r.fault.expires_ns > now ? std::to_string((r.fault.expires_ns - now) / 1'000'000'000ULL) + "s" : "ended";
    if (f.is_object()) {
      f.erase("kind");
      f.erase("duration");
      f.erase("seed");  // on its own line, from the kernel's copy
      f.erase("seed_source");
    }
    out << std::setw(5) << r.slot << std::setw(11) << kind << std::setw(8) << left << std::setw(11) << r.stats.matched
        << std::setw(11) << r.stats.dropped << std::setw(11) << r.stats.corrupted + r.stats.duplicated + r.stats.delayed
        << (f.is_object() ? f.dump() : "") << "\n";
    if (r.budget.max) out << std::setw(5) << "" << cap_text(r.budget, now) << "\n";
    if (r.seed)
      out << std::setw(5) << ""
          << "seed " << *r.seed << " (replay with --seed " << *r.seed << ")\n";
    if (r.budget.start_ns > now)
      out << std::setw(5) << ""
          << "inert until its delayed start, in " << (r.budget.start_ns - now + 999'999'999ULL) / 1'000'000'000ULL
          << "s\n";
  }
  if (!armed) out << "kill switch is engaged: every program passes all packets\n";
  if (has_resource_faults()) {
    out << "\n";
    print_resource_status(out);
  }
  out << "\n";
  (void)print_session_status(out);
  (void)print_applied();
  return kExitCompleted;
}

}  // namespace faultline
