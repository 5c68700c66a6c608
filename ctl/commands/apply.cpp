// faultctl apply -f FILE: a Faultline Policy (as faultctl policy apply), a
// Chaos Mesh document or chaosd's attack JSON, run on this host as the typed
// experiment it means (userspace/ops/chaos_mesh_import.h): the same reader,
// caps, guardrails and engine as faultctl run and faultd's experiments.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/run_flags.h"
#include "userspace/faults/stream/run.h"
#include "userspace/ops/chaos_mesh_import.h"
#include "userspace/ops/experiment_run.h"

namespace faultline {
namespace {

constexpr const char* kApplyUsage =
    "usage: faultctl apply -f FILE [--cgroup PATH] [--dry-run]\n"
    "       faultctl apply -f FILE --control-plane URL [--token T] [--json]\n"
    "  FILE is a Faultline Policy (applied as faultctl policy apply FILE) or a Chaos\n"
    "  Mesh document (chaos-mesh.org/v1alpha1): a NetworkChaos (delay, loss,\n"
    "  duplicate, corrupt, partition, bandwidth), a StressChaos (stressors.cpu) or\n"
    "  a PodChaos (pod-kill, gracePeriod 0: a SIGKILL), a PhysicalMachineChaos, or\n"
    "  chaosd's attack JSON ({\"network\"|\"stress\"|\"process\"|\"disk\": BODY}), run here as the experiment\n"
    "  it means: in the foreground for spec.duration,\n"
    "  under the usual guardrails. Pod selectors are refused; mode: one with\n"
    "  selector.labelSelectors {service: NAME} (what faultctl catalogue render\n"
    "  --format chaos-mesh writes) needs --cgroup PATH, the cgroup v2 path of the\n"
    "  instance to fault. --dry-run: the experiment (JSON) and its plan, nothing\n"
    "  applied. With --control-plane URL [--token T] [--json] the file goes to\n"
    "  faultcp instead (POST /v1/chaos-mesh): its selectors pick registered\n"
    "  service instances or agents, its mode draws among them, one experiment\n"
    "  each. Reference: docs/policy.md (Chaos Mesh import; through faultcp)\n";

constexpr Example kApplyExamples[] = {
    {"a Chaos Mesh delay experiment against an external peer, on this host", "faultctl apply -f network-delay.yaml"},
    {"what it becomes, nothing applied", "faultctl apply -f network-delay.yaml --dry-run"},
    {"a file faultctl catalogue render --format chaos-mesh wrote, on one instance",
     "faultctl apply -f cpu-stress.yaml --cgroup /system.slice/web.service"},
    {"a Faultline policy file (the same as faultctl policy apply)", "faultctl apply -f egress.yaml"},
    {"chaosd's attack JSON", "faultctl apply -f attack.json"},
    {"a NetworkChaos whose selector faultcp resolves over its services",
     "faultctl apply -f web-delay.yaml --control-plane https://cp.example:8443"},
};

struct ApplyArgs {
  std::string file;
  std::string cgroup;
  bool dry_run = false;
};

Result<Parsed<ApplyArgs>> parse_apply_args(const std::vector<std::string>& args) {
  ApplyArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help") return Parsed<ApplyArgs>(HelpText{with_examples(kApplyUsage, kApplyExamples)});
    if (w == "--dry-run") {
      a.dry_run = true;
    } else if (w == "-f" || w == "--filename") {
      if (i + 1 >= args.size()) return bad(w + " needs a file");
      if (!a.file.empty()) return bad("one -f FILE at a time");
      a.file = args[++i];
    } else if (w == "--cgroup") {
      if (i + 1 >= args.size() || args[i + 1].empty()) return bad("--cgroup needs a cgroup v2 path");
      if (!a.cgroup.empty()) return bad("one --cgroup PATH at a time");
      a.cgroup = args[++i];
    } else if (w.size() > 1 && w.front() == '-') {
      return bad("unknown flag '" + w + "'");
    } else {
      return bad("unexpected argument '" + w + "' (the file goes after -f)");
    }
  }
  if (a.file.empty()) return bad("missing -f FILE");
  return Parsed<ApplyArgs>(std::move(a));
}

// yaml-cpp 0.7 never returns on some malformed flow input: give up after 10 s.
ChaosMeshImport read_bounded(std::string_view text, const std::string& file, const ChaosMeshImportOptions& o) {
  if (looks_like_chaosd_attack(text)) return import_chaosd_attack(text, o);  // strict JSON first: no loop
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    if (cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; })) return;
    const std::string line = "faultctl apply: " + file +
                             ": the YAML parser did not finish in 10 s (yaml-cpp 0.7 loops on some malformed flow "
                             "mappings): fix the file's syntax\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(2);
  });
  ChaosMeshImport r = import_chaos_mesh(text, o);
  {
    std::lock_guard lock(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
  return r;
}

int run_apply(const ApplyArgs& a) {
  auto text = read_policy_text(a.file);
  if (!text) return report_error("faultctl apply", text.error());
  const std::string shown = a.file == "-" ? "<stdin>" : a.file;
  if (!looks_like_chaos_mesh(*text) && !looks_like_chaosd_attack(*text)) {
    std::vector<std::string> words = {"apply", a.file};
    if (a.dry_run) words.push_back("--dry-run");
    return cmd_policy(words);
  }
  ChaosMeshImport r = read_bounded(*text, shown, ChaosMeshImportOptions{a.cgroup});
  if (!r.ok()) {
    for (const auto& e : r.errors) std::cerr << e.render(shown) << "\n";
    return kExitBadInput;
  }
  if (!a.cgroup.empty() && r.service.empty()) {
    std::cerr << "faultctl apply: --cgroup: " << shown
              << " selects no instance (no selector.labelSelectors {service: NAME}); leave --cgroup out\n";
    return kExitBadInput;
  }
  std::cerr << "faultctl apply: " << r.kind << " " << r.name << " (" << r.action << ") runs as the experiment "
            << r.spec.dump() << "\n";
  for (const auto& n : r.notes) std::cerr << "faultctl apply: note: " << n << "\n";
  const std::string who = "faultctl apply";
  if (!a.dry_run && ::geteuid() != 0) {
    std::cerr << who << ": needs root (the fault loads BPF programs or moves cgroups); --dry-run shows the plan\n";
    return kExitFailure;
  }
  Experiment& e = *r.experiment;
  auto planned = plan_experiment(e, "", std::cerr);
  if (!planned) return report_error(who, planned.error());
  RunFlags flags;
  flags.guardrails = e.guardrails;
  flags.record = e.record;
  flags.dry_run = a.dry_run;
  const int code = run_fault(*planned->fault, flags, who);
  if (planned->tcp != nullptr) (void)planned->tcp->drain();
  return code;
}

}  // namespace

int cmd_apply(const std::vector<std::string>& args) {
  return run_command("faultctl apply", parse_apply_args(args), kRootNever, run_apply);
}

}  // namespace faultline
