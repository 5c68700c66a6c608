// faultctl apply -f FILE: a Faultline Policy (as faultctl policy apply) or a
// Chaos Mesh NetworkChaos, run on this host as the faultctl run packet fault
// it means: the same parser, caps, guardrails and engine.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/packet_args.h"
#include "userspace/policy/chaos_mesh.h"

namespace faultline {
namespace {

constexpr const char* kApplyUsage =
    "usage: faultctl apply -f FILE [--dry-run]\n"
    "  FILE is a Faultline Policy (applied as faultctl policy apply FILE) or a Chaos\n"
    "  Mesh NetworkChaos (chaos-mesh.org/v1alpha1: delay, loss, duplicate, corrupt,\n"
    "  partition, bandwidth), run here as the faultctl run fault it means: it runs\n"
    "  in the foreground for spec.duration, under the usual guardrails. Pod\n"
    "  selectors are refused (name the peers in spec.externalTargets). --dry-run:\n"
    "  the run command it becomes and its plan, nothing applied. Reference:\n"
    "  docs/policy.md (Chaos Mesh import)\n";

constexpr Example kApplyExamples[] = {
    {"a Chaos Mesh delay experiment against an external peer, on this host", "faultctl apply -f network-delay.yaml"},
    {"what it becomes, nothing applied", "faultctl apply -f network-delay.yaml --dry-run"},
    {"a Faultline policy file (the same as faultctl policy apply)", "faultctl apply -f egress.yaml"},
};

struct ApplyArgs {
  std::string file;
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
ChaosMeshRead read_bounded(std::string_view text, const std::string& file) {
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
  ChaosMeshRead r = read_network_chaos(text);
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
  if (!looks_like_chaos_mesh(*text)) {
    std::vector<std::string> words = {"apply", a.file};
    if (a.dry_run) words.push_back("--dry-run");
    return cmd_policy(words);
  }
  ChaosMeshRead r = read_bounded(*text, shown);
  if (!r.ok()) {
    for (const auto& e : r.errors) std::cerr << e.render(shown) << "\n";
    return kExitBadInput;
  }
  // The run parser judges the values (caps, units); its refusal is put at
  // the field the flag came from.
  if (auto parsed = parse_packet_args(r.fault.words); !parsed) {
    const std::string& msg = parsed.error().message;
    for (const auto& [flag, where] : r.fault.flag_fields) {
      if (msg.find(flag) != std::string::npos) {
        std::cerr << PolicyDiagnostic{where.mark, where.path, msg}.render(shown) << "\n";
        return kExitBadInput;
      }
    }
    std::cerr << shown << ": " << msg << "\n";
    return kExitBadInput;
  }
  std::string line;
  for (const auto& w : r.fault.words) line += " " + w;
  std::cerr << "faultctl apply: NetworkChaos " << r.fault.name << " (" << r.fault.action << ") runs as: faultctl run"
            << line << "\n";
  for (const auto& n : r.fault.notes) std::cerr << "faultctl apply: note: " << n << "\n";
  std::vector<std::string> words = r.fault.words;
  if (a.dry_run) words.push_back("--dry-run");
  return cmd_run(words);
}

}  // namespace

int cmd_apply(const std::vector<std::string>& args) {
  return run_command("faultctl apply", parse_apply_args(args), kRootNever, run_apply);
}

}  // namespace faultline
