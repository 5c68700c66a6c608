// Each BPF object loaded in each configuration Faultline uses, its verifier
// costs recorded (loader/verifier_cost.h) and printed.
#include "userspace/ops/verifier_costs.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "base/exit_code.h"
#include "base/unique_fd.h"
#include "loader/bpffs.h"
#include "loader/features.h"
#include "loader/netfault_object.h"
#include "loader/signals_object.h"
#include "loader/sockaddr_object.h"
#include "loader/syscall_lsm_object.h"
#include "loader/syscall_override_object.h"

namespace faultline {
namespace {

// The throw-away pin folder the netfault object's maps go to, removed with its pins.
class ScratchPins {
 public:
  ScratchPins() : layout_{"/sys/fs/bpf/fl-vcost-" + std::to_string(::getpid())} {}
  ~ScratchPins() {
    std::error_code ec;
    std::filesystem::remove_all(layout_.root, ec);
    remove_layout_locks(layout_);
  }
  ScratchPins(const ScratchPins&) = delete;
  ScratchPins& operator=(const ScratchPins&) = delete;
  [[nodiscard]] const BpffsLayout& layout() const { return layout_; }

 private:
  BpffsLayout layout_;
};

// Loads with a recorder alive; whatever `load` returns is closed before the next.
ObjectCost measure(const std::string& config, const std::function<Status()>& load) {
  ObjectCost out{config};
  VerifierCostRecorder rec;
  if (auto st = load(); !st) {
    out.error = st.error().describe();
    return out;
  }
  out.loaded = true;
  out.programs = rec.costs();
  return out;
}

template <typename Loaded>
Status dropped(const Result<Loaded>& r) {
  if (!r) return r.error();
  return {};
}

// Objects every kernel of the matrix must load; the others need a hook a
// kernel may lack (features() says which).
bool expected_here(const std::string& config) {
  const Features& f = features();
  if (config.rfind("syscall_lsm", 0) == 0) return f.bpf_lsm.available;
  if (config.rfind("syscall_override", 0) == 0) return f.kprobe_override.available;
  return true;
}

}  // namespace

std::vector<ObjectCost> measure_verifier_costs() {
  std::vector<ObjectCost> out;
  {
    ScratchPins pins;
    out.push_back(measure("netfault", [&]() -> Status {
      FL_TRY(ensure_bpffs(pins.layout()));
      return dropped(NetfaultObject::load(pins.layout(), 0, FL_EGRESS_DROP_REDIRECT, FL_DIR_EGRESS | FL_DIR_INGRESS));
    }));
  }
  out.push_back(measure("sockaddr (guard)", [] { return dropped(SockaddrObject::load(1)); }));
  out.push_back(measure("sockaddr (applied policy)", []() -> Status {
    UniqueFd gen(bpf_map_create(BPF_MAP_TYPE_ARRAY, "fl_sa_gen", 4, 4, 1, nullptr));
    if (!gen) return errno_error("cannot create the generation map");
    return dropped(SockaddrObject::load_applied(gen.get(), true));
  }));
  out.push_back(measure("signals", [] { return dropped(SignalsObject::start()); }));
  out.push_back(measure("syscall_lsm", [] { return dropped(SyscallLsmObject::load()); }));
  out.push_back(measure("syscall_override", [] { return dropped(SyscallOverrideObject::load()); }));
  return out;
}

int write_verifier_costs(bool json, std::ostream& out) {
  const auto objects = measure_verifier_costs();
  int code = kExitCompleted;
  double worst = 0;
  std::string worst_name;
  nlohmann::json j = nlohmann::json::array();
  for (const auto& o : objects) {
    const bool expected = expected_here(o.config);
    if (!o.loaded && expected) code = 1;
    for (const auto& p : o.programs) {
      if (p.share_of_limit() > kVerifierBudgetShare) code = 1;
      if (p.share_of_limit() > worst) {
        worst = p.share_of_limit();
        worst_name = o.config + " " + p.program;
      }
    }
    if (json) {
      nlohmann::json progs = nlohmann::json::array();
      for (const auto& p : o.programs)
        progs.push_back({{"program", p.program},
                         {"verified_insns", p.verified_insns},
                         {"share_of_limit", p.share_of_limit()},
                         {"verify_us", p.verify_us}});
      j.push_back({{"object", o.config},
                   {"loaded", o.loaded},
                   {"expected", expected},
                   {"error", o.error},
                   {"programs", progs}});
    }
  }
  if (json) {
    out << nlohmann::json{{"limit", kVerifierInsnLimit}, {"budget_share", kVerifierBudgetShare}, {"objects", j}}.dump(2)
        << "\n";
    return code;
  }
  out << std::left << std::setw(28) << "OBJECT" << std::setw(20) << "PROGRAM" << std::right << std::setw(10)
      << "VERIFIED" << std::setw(9) << "LIMIT" << std::setw(11) << "TIME"
      << "\n";
  for (const auto& o : objects) {
    if (!o.loaded) {
      out << std::left << std::setw(28) << o.config << "not loaded"
          << (expected_here(o.config) ? " (EXPECTED TO LOAD HERE): " : " (a hook this kernel lacks): ") << o.error
          << "\n";
      continue;
    }
    for (const auto& p : o.programs) {
      char share[16], time[24];
      std::snprintf(share, sizeof(share), "%.1f%%", 100.0 * p.share_of_limit());
      std::snprintf(time, sizeof(time), "%.1f ms", double(p.verify_us) / 1000.0);
      out << std::left << std::setw(28) << o.config << std::setw(20) << p.program << std::right << std::setw(10)
          << p.verified_insns << std::setw(9) << share << std::setw(11) << (p.verify_us ? time : "-")
          << (p.share_of_limit() > kVerifierBudgetShare ? "  OVER BUDGET" : "") << "\n";
    }
  }
  char w[16];
  std::snprintf(w, sizeof(w), "%.1f%%", 100.0 * worst);
  out << "largest: " << worst_name << " at " << w << " of the verifier's " << kVerifierInsnLimit
      << "-instruction limit (budget " << int(100 * kVerifierBudgetShare) << "%)\n";
  return code;
}

}  // namespace faultline
