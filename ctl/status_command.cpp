// faultctl status, abort, features, uninstall: read or undo the pinned state.
#include <bpf/bpf.h>

#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "ctl/commands.h"
#include "ctl/resource_command.h"
#include "ctl/session_command.h"
#include "loader/features.h"
#include "base/exit_code.h"
#include "userspace/faults/capabilities.h"
#include "userspace/faults/packet/netfault_engine.h"
#include "userspace/state/session_registry.h"

namespace faultline {
namespace {

bool has_flag(const std::vector<std::string>& args, const std::string& f) {
  return std::find(args.begin(), args.end(), f) != args.end();
}

// Refuses anything but the flags a command knows.
bool only_flags(const std::string& cmd, const std::vector<std::string>& args, const std::vector<std::string>& known) {
  for (const auto& a : args) {
    if (std::find(known.begin(), known.end(), a) == known.end()) {
      std::cerr << "faultctl " << cmd << ": unknown argument '" << a << "'\n";
      return false;
    }
  }
  return true;
}

const char* reason_name(uint32_t r) {
  switch (r) {
    case FL_DROP_LOSS: return "loss";
    case FL_DROP_PARTITION: return "partition";
    case FL_DROP_FLOWDROP: return "flowdrop";
    case FL_DROP_DNS: return "dns";
    case FL_DROP_RATE_HORIZON: return "rate_horizon";
    default: return "none";
  }
}

}  // namespace

int cmd_status(const std::vector<std::string>& args) {
  if (!only_flags("status", args, {"--json"})) return kExitBadInput;
  bool json = has_flag(args, "--json");
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
  if (json) {
    nlohmann::json out;
    out["installed"] = maps.ok();
    out["armed"] = armed != 0;
    out["faults"] = nlohmann::json::array();
    for (const auto& r : rows) {
      nlohmann::json f = nlohmann::json::parse(r.meta.spec, nullptr, false);
      if (f.is_discarded()) f = nlohmann::json::object();
      f["id"] = r.slot;
      f["active"] = r.fault.expires_ns > now;
      f["left_s"] = r.fault.expires_ns > now ? (r.fault.expires_ns - now) / 1'000'000'000ULL : 0;
      f["owner_pid"] = r.meta.owner_pid;
      f["counters"] = {{"matched", r.stats.matched}, {"dropped", r.stats.dropped}, {"corrupted", r.stats.corrupted},
                       {"duplicated", r.stats.duplicated}, {"delayed", r.stats.delayed}, {"bytes", r.stats.bytes}};
      out["faults"].push_back(f);
    }
    nlohmann::json rj = nlohmann::json::object();
    for (uint32_t i = 1; i < reasons.size(); ++i) rj[reason_name(i)] = reasons[i];
    out["drop_reasons"] = rj;
    out["resource_faults"] = resource_status_json();
    nlohmann::json sessions = session_status_json();
    out["syscall_faults"] = sessions["syscall_faults"];
    out["guards"] = sessions["guards"];
    std::cout << out.dump() << "\n";
    return kExitCompleted;
  }
  if (rows.empty()) {
    bool any = false;
    if (has_resource_faults()) {
      print_resource_status(std::cout);
      any = true;
    }
    if (any) std::cout << "\n";
    if (!print_session_status(std::cout) && !any)
      std::cout << "no active faults" << (maps ? "" : " (nothing installed)") << "\n";
    return kExitCompleted;
  }
  std::cout << std::left << std::setw(5) << "ID" << std::setw(11) << "KIND" << std::setw(8) << "LEFT" << std::setw(11)
            << "MATCHED" << std::setw(11) << "DROPPED" << std::setw(11) << "ALTERED" << "SCOPE\n";
  for (const auto& r : rows) {
    nlohmann::json f = nlohmann::json::parse(r.meta.spec, nullptr, false);
    std::string kind = f.is_object() ? f.value("kind", "?") : "?";
    std::string left = r.fault.expires_ns > now ? std::to_string((r.fault.expires_ns - now) / 1'000'000'000ULL) + "s" : "ended";
    if (f.is_object()) {
      f.erase("kind");
      f.erase("duration");
    }
    std::cout << std::setw(5) << r.slot << std::setw(11) << kind << std::setw(8) << left << std::setw(11) << r.stats.matched
              << std::setw(11) << r.stats.dropped << std::setw(11) << r.stats.corrupted + r.stats.duplicated + r.stats.delayed
              << (f.is_object() ? f.dump() : "") << "\n";
  }
  if (!armed) std::cout << "kill switch is engaged: every program passes all packets\n";
  if (has_resource_faults()) {
    std::cout << "\n";
    print_resource_status(std::cout);
  }
  std::cout << "\n";
  (void)print_session_status(std::cout);
  return kExitCompleted;
}

int cmd_abort(const std::vector<std::string>& args) {
  NetfaultEngine engine;
  if (args.size() != 1) {
    std::cerr << "faultctl abort: give one fault ID (see faultctl status) or --all\n";
    return kExitBadInput;
  }
  if (args[0] == "--all") {
    // Resource faults first: their revert needs no kernel state and must not wait on it.
    auto res = abort_all_resource_faults();
    if (!res) {
      std::cerr << "faultctl abort: " << res.error().describe() << "\n";
      return kExitFailure;
    }
    if (*res > 0) std::cout << *res << " resource fault" << (*res == 1 ? "" : "s") << " reverted\n";
    if (auto n = abort_all_syscall_faults(std::cout); !n) {
      std::cerr << "faultctl abort: " << n.error().describe() << "\n";
      return kExitFailure;
    }
    if (auto st = engine.abort_all(); !st) {
      std::cerr << "faultctl abort: " << st.error().describe() << "\n";
      return kExitFailure;
    }
    std::cout << "all faults ended (kill switch) and Faultline removed from every device\n";
    return kExitCompleted;
  }
  const std::string& id = args[0];
  if (is_resource_fault_id(id)) return abort_resource_fault(id);
  if (is_session_id(id)) return abort_session_command(id);
  if (id.empty() || id.size() > 6 || id.find_first_not_of("0123456789") != std::string::npos) {
    std::cerr << "faultctl abort: '" << id
              << "' is not a fault ID (a number, rN, sN or gN from faultctl status) or --all\n";
    return kExitBadInput;
  }
  uint32_t slot = static_cast<uint32_t>(std::stoul(id));
  auto maps = NetfaultMaps::open(engine.layout(), false);
  if (!maps || !FaultTable(*maps).exists(slot)) {
    std::cerr << "faultctl abort: no active fault " << id << "\n";
    return kExitBadInput;
  }
  // Deactivate first: the fault stops at this instant, cleanup follows.
  (void)FaultTable(*maps).deactivate(slot);
  if (auto st = engine.end(slot); !st) {
    std::cerr << "faultctl abort: fault " << id << " stopped, but cleanup failed: " << st.error().describe() << "\n";
    return kExitFailure;
  }
  std::cout << "fault " << id << " ended\n";
  return kExitCompleted;
}

int cmd_features(const std::vector<std::string>& args) {
  if (!only_flags("features", args, {"--json"})) return kExitBadInput;
  const Features& f = features();
  auto caps = capabilities(f);
  struct Row {
    const char* name;
    const FeatureProbe* p;
  };
  const Row probes[] = {{"bpf", &f.bpf_syscall},           {"tcx", &f.tcx},
                        {"clsact", &f.clsact},             {"bpf_loop", &f.bpf_loop},
                        {"sch_fq", &f.sch_fq},             {"cgroup_v2", &f.cgroup_v2},
                        {"bpf_set_retval", &f.set_retval}, {"ringbuf", &f.ringbuf},
                        {"lsm_bpf_listed", &f.lsm_listed}, {"bpf_lsm", &f.bpf_lsm},
                        {"fentry", &f.fentry},             {"kprobe_override", &f.kprobe_override},
                        {"seccomp_user_notif", &f.seccomp_notify}, {"fanotify_perm", &f.fanotify_perm},
                        {"io_uring", &f.io_uring}};
  if (has_flag(args, "--json")) {
    nlohmann::json j;
    for (const auto& r : probes) j["probes"][r.name] = {{"available", r.p->available}, {"detail", r.p->detail}};
    for (const auto& c : caps) {
      j["capabilities"].push_back({{"capability", c.name}, {"ladder", c.ladder},
                                   {"chosen", c.chosen.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.chosen)},
                                   {"why", c.why}});
    }
    std::cout << j.dump(2) << "\n";
    return kExitCompleted;
  }
  for (const auto& c : caps) {
    std::string ladder;
    for (const auto& l : c.ladder) ladder += (ladder.empty() ? "" : " > ") + l;
    std::cout << c.name << "\n    uses:   " << (c.chosen.empty() ? "unavailable" : c.chosen) << "\n    ladder: " << ladder
              << "\n    why:    " << c.why << "\n";
  }
  std::cout << "\nKERNEL PROBE          RESULT  DETAIL\n";
  for (const auto& r : probes) {
    std::cout << std::left << std::setw(22) << r.name << std::setw(8) << (r.p->available ? "yes" : "no") << r.p->detail
              << "\n";
  }
  return kExitCompleted;
}

int cmd_uninstall(const std::vector<std::string>& args) {
  if (!only_flags("uninstall", args, {})) return kExitBadInput;
  // Host resource faults are Faultline's too: nothing of ours stays behind.
  if (auto res = abort_all_resource_faults(); !res) {
    std::cerr << "faultctl uninstall: " << res.error().describe() << "\n";
    return kExitFailure;
  } else if (*res > 0) {
    std::cout << *res << " resource fault" << (*res == 1 ? "" : "s") << " reverted\n";
  }
  if (auto n = abort_all_syscall_faults(std::cout); !n) {
    std::cerr << "faultctl uninstall: " << n.error().describe() << "\n";
    return kExitFailure;
  }
  NetfaultEngine engine;
  if (auto st = engine.uninstall(); !st) {
    std::cerr << "faultctl uninstall: " << st.error().describe() << "\n";
    return kExitFailure;
  }
  // A removed tc filter lets go of its program only after an RCU grace period,
  // so a program can still be listed for a moment: give the kernel up to 2 s.
  int left = count_netfault_progs();
  for (int i = 0; i < 40 && left > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    left = count_netfault_progs();
  }
  if (left > 0) {
    std::cerr << "faultctl uninstall: " << left << " netfault programs are still loaded (held by another process?)\n";
    return kExitFailure;
  }
  // A guard is enforcement its operator started around a command: uninstall
  // does not lift it behind their back, but says it is there.
  auto guards = live_guard_lines();
  if (!guards.empty()) {
    std::cout << "Faultline uninstalled, except " << guards.size() << " running guard" << (guards.size() == 1 ? "" : "s")
              << " whose programs go when the command ends (or with faultctl abort ID):\n";
    for (const auto& g : guards) std::cout << "  " << g << "\n";
    return kExitCompleted;
  }
  std::cout << "Faultline uninstalled: no programs, links, filters or pins remain\n";
  return kExitCompleted;
}

}  // namespace faultline
