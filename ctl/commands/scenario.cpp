// faultctl scenario validate|run FILE: a scenario's steps (experiments,
// templates of the catalogue, waits) checked whole, then run in order, each
// as `faultctl run` runs its fault (guardrails, records, exit codes), under
// the scenario's SLO watchdog; the first abort ends the scenario.
#include "userspace/orchestration/scenario.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "base/files.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "ctl/run_flags.h"
#include "userspace/faults/stream/run.h"
#include "userspace/ops/experiment_run.h"
#include "userspace/run/record.h"
#include "userspace/run/stop_signals.h"

namespace faultline {
namespace {

constexpr const char* kScenarioUsage =
    "usage: faultctl scenario validate FILE [--json]\n"
    "       faultctl scenario run FILE [--json] [--record DIR] [--dry-run]\n"
    "  FILE is a scenario (JSON, \"kind\": \"Scenario\"): steps run in order, each\n"
    "  a typed experiment, a template of the catalogue (with its params and the\n"
    "  instance's cgroup) or a wait; its guardrails (an SLO watchdog) watch every\n"
    "  step. validate reads and checks it whole (every experiment, every\n"
    "  template's parameters, the cap on the planned time): nothing runs.\n"
    "  run: each step as faultctl run runs its fault. A guardrail's abort ends\n"
    "  the scenario (exit 7); another failure ends it too unless on_failure is\n"
    "  continue. --record DIR: the record of each step with a hypothesis, in\n"
    "  DIR/NN-STEP. --dry-run: each step's plan, nothing applied.\n"
    "  exit codes: 0 every step done, 1 a step failed, 2 bad input (nothing\n"
    "  run), 7 aborted by a guardrail, 8 a step's hypothesis refuted\n"
    "  Reference: docs/orchestration.md (Scenarios)\n";

constexpr Example kScenarioExamples[] = {
    {"check a scenario file, nothing run", "faultctl scenario validate checkout.json"},
    {"run it, one JSON line per event", "sudo faultctl scenario run checkout.json --json"},
    {"run it and keep each step's record", "sudo faultctl scenario run checkout.json --record /var/lib/records/s1"},
};

struct ScenarioArgs {
  std::string verb;  // validate, run
  std::string file;
  bool json = false;
  bool dry_run = false;
  std::string record;
};

Result<Parsed<ScenarioArgs>> parse_scenario_args(const std::vector<std::string>& args) {
  ScenarioArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help")
      return Parsed<ScenarioArgs>(HelpText{with_examples(kScenarioUsage, kScenarioExamples)});
    if (a.verb.empty()) {
      if (w != "validate" && w != "run") return bad("'" + w + "': expected validate or run");
      a.verb = w;
    } else if (w == "--json") {
      a.json = true;
    } else if (w == "--dry-run" && a.verb == "run") {
      a.dry_run = true;
    } else if (w == "--record" && a.verb == "run") {
      if (i + 1 >= args.size()) return bad("--record needs a folder");
      a.record = args[++i];
    } else if (w.size() > 1 && w.front() == '-') {
      return bad("unknown flag '" + w + "' for scenario " + a.verb);
    } else if (a.file.empty()) {
      a.file = w;
    } else {
      return bad("unexpected argument '" + w + "' (one FILE)");
    }
  }
  if (a.verb.empty()) return bad("expected validate or run");
  if (a.file.empty()) return bad(a.verb + " needs a FILE");
  if (a.dry_run && !a.record.empty()) return bad("--record with --dry-run: a dry run records nothing");
  return Parsed<ScenarioArgs>(std::move(a));
}

// The file read and checked whole; an error (exit 2) names the file and the field.
std::variant<Scenario, int> load_scenario(const ScenarioArgs& a, const std::string& who) {
  auto text = read_text_file(a.file);
  if (!text) {
    std::cerr << who << ": " << a.file << ": " << text.error().message << "\n";
    return kExitBadInput;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& e) {
    std::cerr << who << ": " << a.file << ": not JSON: " << e.what() << "\n";
    return kExitBadInput;
  }
  auto s = read_scenario(doc);
  if (auto* e = std::get_if<SpecError>(&s)) {
    std::cerr << who << ": " << a.file << ": " << e->text() << "\n";
    return kExitBadInput;
  }
  return std::get<Scenario>(std::move(s));
}

nlohmann::json step_json(const Scenario& s, size_t i) {
  const ScenarioStep& step = s.steps[i];
  nlohmann::json j{{"step", i + 1}, {"name", step.name}, {"planned_s", step.planned_s}};
  if (step.is_wait()) {
    j["wait_s"] = step.wait_s;
    return j;
  }
  if (step.tmpl) {
    j["template"] = step.tmpl->name;
    j["template_version"] = step.tmpl->version;
    j["template_sha256"] = step.tmpl->sha256();
    j["params"] = step.params;
  }
  j["experiment"] = step.spec;
  return j;
}

int scenario_validate(const ScenarioArgs& a, const Scenario& s) {
  if (a.json) {
    nlohmann::json steps = nlohmann::json::array();
    for (size_t i = 0; i < s.steps.size(); ++i) steps.push_back(step_json(s, i));
    std::cout << nlohmann::json{{"scenario", s.name},
                                {"valid", true},
                                {"planned_s", s.planned_s()},
                                {"max_duration_s", s.max_duration_s},
                                {"steps", steps}}
                     .dump()
              << "\n";
    return kExitCompleted;
  }
  std::cout << a.file << ": scenario " << s.name << " is valid: " << s.steps.size() << " step(s), " << s.planned_s()
            << " s planned of at most " << s.max_duration_s << " s\n";
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const ScenarioStep& step = s.steps[i];
    std::cout << "  " << i + 1 << ". " << step.name << ": ";
    if (step.is_wait())
      std::cout << "wait " << step.wait_s << " s\n";
    else if (step.tmpl)
      std::cout << step.tmpl->name << " v" << step.tmpl->version << " " << step.params.dump() << " -> "
                << step.spec.value("kind", "") << ", " << step.planned_s << " s\n";
    else
      std::cout << step.spec.value("kind", "") << " experiment, " << step.planned_s << " s\n";
  }
  return kExitCompleted;
}

const char* scenario_outcome(int code) {
  switch (code) {
    case kExitCompleted:
      return "completed";
    case kExitGuardrail:
      return "aborted";
    case kExitRefuted:
      return "refuted";
    case kExitBadInput:
      return "bad-input";
    default:
      return "failed";
  }
}

void scenario_line(const ScenarioArgs& a, nlohmann::json line, const std::string& text) {
  if (a.json)
    std::cout << line.dump() << std::endl;
  else
    std::cerr << "faultctl scenario run: " << text << "\n";
}

// SIGINT, SIGTERM or SIGHUP for the whole scenario: each step's run loop ends
// its fault on one (as faultctl run does), and the scenario stops after it.
class ScenarioStop final : public StopSource {
 public:
  ScenarioStop() : signals_(true) {}
  [[nodiscard]] int pending() const override { return signals_.pending(); }
  int take() override {
    const int sig = signals_.take();
    if (sig != 0) seen_ = sig;
    return sig;
  }
  [[nodiscard]] int seen() const { return seen_ != 0 ? seen_ : signals_.pending(); }

 private:
  StopSignals signals_;
  int seen_ = 0;
};

int scenario_step_run(const ScenarioArgs& a, const Scenario& s, size_t i, ScenarioStop& stop) {
  const ScenarioStep& step = s.steps[i];
  const std::string who = "faultctl scenario run: step " + std::to_string(i + 1) + " (" + step.name + ")";
  Experiment e = *step.experiment;
  std::string record_dir;
  if (e.record) {
    if (!a.record.empty()) {
      char nn[8];
      std::snprintf(nn, sizeof nn, "%02zu", i + 1);
      record_dir = a.record + "/" + nn + "-" + step.name;
    }
    e.record->dir = record_dir;
    // The record keeps what made the step: the template and its SHA-256, or the experiment.
    e.record->command_line = "faultctl scenario run " + a.file + ", scenario " + s.name + ", step " +
                             std::to_string(i + 1) + " (" + step.name + ")" +
                             (step.tmpl ? ": template " + step.tmpl->name + " v" + std::to_string(step.tmpl->version) +
                                              " sha256 " + step.tmpl->sha256() + " params " + step.params.dump()
                                        : std::string()) +
                             ": experiment " + step.spec.dump();
  }
  auto planned = plan_experiment(e, record_dir, std::cerr);
  if (!planned) return report_error(who, planned.error());
  RunFlags flags;
  flags.guardrails = e.guardrails;
  flags.record = e.record;
  flags.json = a.json;
  flags.dry_run = a.dry_run;
  if (auto red = Redactor::make({}, true)) flags.redactor = std::move(*red);
  if (flags.record) flags.record->redactor = flags.redactor;
  if (s.watchdog) {
    SloWatchdogFlags w;
    w.service = s.watchdog->service;
    w.abort_burn_rate_5m = s.watchdog->abort_burn_rate_5m;
    w.prometheus.url = s.watchdog->prometheus_url;
    w.interval_ns = static_cast<uint64_t>(s.watchdog->interval_s) * 1'000'000'000ULL;
    flags.slo_watchdog = std::move(w);
  }
  const int code = run_fault(*planned->fault, flags, who, RunIo{std::cout, std::cerr, &stop, std::nullopt});
  if (planned->tcp != nullptr) (void)planned->tcp->drain();
  return code;
}

int scenario_run(const ScenarioArgs& a, const Scenario& s) {
  if (!a.dry_run && ::geteuid() != 0) {
    std::cerr << "faultctl scenario run: needs root (its steps' faults load BPF programs and move cgroups)\n";
    return kExitFailure;
  }
  if (!a.record.empty()) {
    if (auto ok = check_record_dir(a.record); !ok) return report_error("faultctl scenario run", ok.error());
    std::error_code ec;
    std::filesystem::create_directories(a.record, ec);
    if (ec) {
      std::cerr << "faultctl scenario run: --record " << a.record << ": " << ec.message() << "\n";
      return kExitFailure;
    }
  }
  scenario_line(a,
                {{"event", "scenario_started"},
                 {"scenario", s.name},
                 {"steps", s.steps.size()},
                 {"planned_s", s.planned_s()},
                 {"max_duration_s", s.max_duration_s}},
                "scenario " + s.name + ": " + std::to_string(s.steps.size()) + " step(s), " +
                    std::to_string(s.planned_s()) + " s planned");
  ScenarioStop stop;
  int result = kExitCompleted;
  size_t run = 0;
  std::string stopped;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const ScenarioStep& step = s.steps[i];
    nlohmann::json line = step_json(s, i);
    line.erase("experiment");
    line["event"] = "scenario_step_started";
    scenario_line(a, line, "step " + std::to_string(i + 1) + " (" + step.name + ") starts");
    ++run;
    int code = kExitCompleted;
    if (step.is_wait()) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(step.wait_s);
      while (!a.dry_run && stop.seen() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (stop.seen() != 0) code = kExitFailure;
    } else {
      code = scenario_step_run(a, s, i, stop);
    }
    line["event"] = "scenario_step_ended";
    line["exit_code"] = code;
    line["outcome"] = scenario_outcome(code);
    scenario_line(a, line,
                  "step " + std::to_string(i + 1) + " (" + step.name + ") " + scenario_outcome(code) + " (exit " +
                      std::to_string(code) + ")");
    if (stop.seen() != 0) {
      if (result == kExitCompleted) result = code == kExitCompleted ? kExitFailure : code;
      stopped = "interrupted (signal " + std::to_string(stop.seen()) + ") during step " + std::to_string(i + 1) + " (" +
                step.name + ")";
      break;
    }
    if (code == kExitCompleted) continue;
    if (result == kExitCompleted || code == kExitGuardrail) result = code;
    // A brake ends every step: a guardrail's abort is never continued past.
    if (code == kExitGuardrail) {
      stopped = "step " + std::to_string(i + 1) + " (" + step.name + ") was aborted by a guardrail";
      break;
    }
    if (!s.continue_on_failure) {
      stopped = "step " + std::to_string(i + 1) + " (" + step.name + ") " + scenario_outcome(code) +
                " and on_failure is abort";
      break;
    }
  }
  nlohmann::json end{{"event", "scenario_ended"}, {"scenario", s.name}, {"outcome", scenario_outcome(result)},
                     {"exit_code", result},       {"steps_run", run},   {"steps", s.steps.size()}};
  if (!stopped.empty()) end["stopped"] = stopped;
  scenario_line(a, end,
                "scenario " + s.name + " " + scenario_outcome(result) + ": " + std::to_string(run) + " of " +
                    std::to_string(s.steps.size()) + " step(s) run" + (stopped.empty() ? "" : "; " + stopped));
  return result;
}

int run_scenario(const ScenarioArgs& a) {
  const std::string who = "faultctl scenario " + a.verb;
  auto loaded = load_scenario(a, who);
  if (const int* code = std::get_if<int>(&loaded)) return *code;
  const Scenario& s = std::get<Scenario>(loaded);
  return a.verb == "validate" ? scenario_validate(a, s) : scenario_run(a, s);
}

}  // namespace

int cmd_scenario(const std::vector<std::string>& args) {
  return run_command("faultctl scenario", parse_scenario_args(args), kRootNever, run_scenario);
}

}  // namespace faultline
