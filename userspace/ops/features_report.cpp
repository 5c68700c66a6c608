// The feature probes and the mechanism each fault uses, as text or JSON: what
// faultctl features prints and what faultd's GET /v1/features answers.
#include "userspace/ops/features_report.h"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "base/exit_code.h"
#include "loader/features.h"
#include "loader/sockaddr_object.h"
#include "userspace/faults/capabilities.h"

namespace faultline {

int write_features(bool json, std::ostream& out) {
  const Features& f = features();
  auto caps = capabilities(f);
  // Host rules of an applied policy (spec.egress[].rules[].host) learn their
  // addresses with a program of their own: its row says whether it loads here.
  const FeatureProbe& learner = dns_learner_probe();
  caps.push_back(
      Capability{"DNS-learned host rules (policy apply)",
                 {"cgroup_skb DNS learner (fl_dns_ingress)"},
                 learner.available ? "cgroup_skb DNS learner (fl_dns_ingress)" : "",
                 learner.available ? learner.detail : learner.detail + "; address rules (cidr) still apply"});
  struct Row {
    const char* name;
    const FeatureProbe* p;
  };
  const Row probes[] = {{"bpf", &f.bpf_syscall},
                        {"tcx", &f.tcx},
                        {"clsact", &f.clsact},
                        {"bpf_loop", &f.bpf_loop},
                        {"sch_fq", &f.sch_fq},
                        {"cgroup_v2", &f.cgroup_v2},
                        {"bpf_set_retval", &f.set_retval},
                        {"ringbuf", &f.ringbuf},
                        {"lsm_bpf_listed", &f.lsm_listed},
                        {"bpf_lsm", &f.bpf_lsm},
                        {"fentry", &f.fentry},
                        {"kprobe_override", &f.kprobe_override},
                        {"seccomp_user_notif", &f.seccomp_notify},
                        {"fanotify_perm", &f.fanotify_perm},
                        {"io_uring", &f.io_uring},
                        {"dns_learner", &learner}};
  if (json) {
    nlohmann::json j;
    for (const auto& r : probes) j["probes"][r.name] = {{"available", r.p->available}, {"detail", r.p->detail}};
    for (const auto& c : caps) {
      j["capabilities"].push_back({{"capability", c.name},
                                   {"ladder", c.ladder},
                                   {"chosen", c.chosen.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.chosen)},
                                   {"why", c.why}});
    }
    out << j.dump(2) << "\n";
    return kExitCompleted;
  }
  for (const auto& c : caps) {
    std::string ladder;
    for (const auto& l : c.ladder) ladder += (ladder.empty() ? "" : " > ") + l;
    out << c.name << "\n    uses:   " << (c.chosen.empty() ? "unavailable" : c.chosen) << "\n    ladder: " << ladder
        << "\n    why:    " << c.why << "\n";
  }
  out << "\nKERNEL PROBE          RESULT  DETAIL\n";
  for (const auto& r : probes) {
    out << std::left << std::setw(22) << r.name << std::setw(8) << (r.p->available ? "yes" : "no") << r.p->detail
        << "\n";
  }
  return kExitCompleted;
}

}  // namespace faultline
