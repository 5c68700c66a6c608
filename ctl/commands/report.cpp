// faultctl report DIR [--json] | --verify DIR: an experiment record for people, and its fingerprints.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "base/exit_code.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "userspace/run/record.h"
#include "userspace/run/record_reader.h"

namespace faultline {
namespace {

constexpr const char* kReportUsage =
    "usage: faultctl report DIR [--json]   |   faultctl report --verify DIR\n"
    "  an experiment record (the --record DIR of a run) for people; --verify\n"
    "  recomputes its fingerprints\n";

constexpr Example kReportExamples[] = {
    {"the record of a run with --record ./exp-latency: hypothesis, phases, verdict", "faultctl report ./exp-latency"},
    {"check its fingerprints: exit 0 if nothing was changed since it was written",
     "faultctl report --verify ./exp-latency"},
    {"every sample and the verdict as JSON", "faultctl report ./exp-latency --json"},
};

// The record folder, and how to show it.
struct ReportArgs {
  std::string dir;
  bool json = false;
  bool verify = false;  // check the fingerprints instead of printing the record
};

Result<Parsed<ReportArgs>> parse_report_args(const std::vector<std::string>& args) {
  ReportArgs r;
  for (const auto& a : args) {
    if (a == "--json")
      r.json = true;
    else if (a == "--verify")
      r.verify = true;
    else if (a == "-h" || a == "--help")
      return Parsed<ReportArgs>(HelpText{with_examples(kReportUsage, kReportExamples)});
    else if (!a.empty() && a[0] == '-')
      return bad("unknown flag '" + a + "'");
    else if (!r.dir.empty())
      return bad("one record folder at a time ('" + r.dir + "', then '" + a + "')");
    else
      r.dir = a;
  }
  if (r.dir.empty()) return bad("give a record folder (the --record DIR of a run)");
  return Parsed<ReportArgs>(std::move(r));
}

std::string num_ms(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number()) return "-";
  double d = v.get<double>();
  std::ostringstream o;
  o << std::fixed << std::setprecision(d < 10 ? 2 : 1) << d << "ms";
  return o.str();
}

std::string pct(const nlohmann::json& v) {
  if (!v.is_number()) return "-";
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << v.get<double>() << "%";
  return o.str();
}

void phase_row(std::ostream& out, const std::string& name, const nlohmann::json& s) {
  if (!s.is_object() || s.value("samples", 0) == 0) {
    out << "  " << std::left << std::setw(8) << name << "no readings\n";
    return;
  }
  out << "  " << std::left << std::setw(8) << name << std::setw(8) << s.value("samples", 0) << std::setw(9)
      << pct(s.value("success_percent", nlohmann::json())) << std::setw(10)
      << num_ms(s.value("p50_ms", nlohmann::json())) << std::setw(10) << num_ms(s.value("p90_ms", nlohmann::json()))
      << std::setw(10) << num_ms(s.value("p99_ms", nlohmann::json())) << num_ms(s.value("max_ms", nlohmann::json()))
      << "\n";
}

// One mark per reading, scaled over the healthy latencies of the whole record;
// x marks a failed reading. Enough to see where the fault bent the signal.
std::string sparkline(const std::vector<nlohmann::json>& samples, const std::string& phase, double lo, double hi) {
  static const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string out;
  for (const auto& s : samples) {
    if (s.value("phase", "") != phase) continue;
    if (!s.value("healthy", false) && !s.contains("latency_ms")) {
      out += "x";
      continue;
    }
    double v = s.value("latency_ms", 0.0);
    int idx = hi > lo ? static_cast<int>(std::lround((v - lo) / (hi - lo) * 7)) : 0;
    out += s.value("healthy", false) ? kBars[std::clamp(idx, 0, 7)] : "x";
  }
  return out.empty() ? "-" : out;
}

int verify(const std::string& dir) {
  RecordCheck c = verify_record(dir);
  if (c.intact) {
    std::cout << "record " << dir << " is intact: hypothesis sha256 " << c.hypothesis_sha256 << "\n";
    return kExitCompleted;
  }
  std::cout << "record " << dir << " does NOT verify:\n";
  for (const auto& p : c.problems) std::cout << "  " << p << "\n";
  return kExitFailure;
}

int report(const ReportArgs& a) {
  const std::string& dir = a.dir;
  const bool json = a.json, check = a.verify;
  if (check && !load_record(dir)) {
    std::cerr << "faultctl report: " << load_record(dir).error().message << "\n";
    return kExitBadInput;
  }
  if (check && json) {
    RecordCheck c = verify_record(dir);
    std::cout << nlohmann::json{{"dir", dir},
                                {"intact", c.intact},
                                {"hypothesis_sha256", c.hypothesis_sha256},
                                {"problems", c.problems}}
                     .dump()
              << "\n";
    return c.intact ? kExitCompleted : kExitFailure;
  }
  if (check) return verify(dir);

  auto rec = load_record(dir);
  if (!rec) {
    std::cerr << "faultctl report: " << rec.error().message << "\n";
    return kExitBadInput;
  }
  RecordCheck c = verify_record(dir);
  if (json) {
    nlohmann::json j{{"dir", dir}, {"hypothesis", rec->hypothesis}, {"samples", rec->samples}};
    j["verdict"] = rec->verdict ? *rec->verdict : nlohmann::json(nullptr);
    j["verify"] = {{"intact", c.intact}, {"hypothesis_sha256", c.hypothesis_sha256}, {"problems", c.problems}};
    std::cout << j.dump(2) << "\n";
    return kExitCompleted;
  }

  const auto& h = rec->hypothesis;
  std::ostream& out = std::cout;
  out << "experiment record " << dir << "\n";
  out << "hypothesis:  \"" << h.value("hypothesis", "") << "\"\n";
  out << "fingerprint: sha256 " << c.hypothesis_sha256 << (c.intact ? " (verified)" : " (DOES NOT VERIFY)") << "\n";
  for (const auto& p : c.problems) out << "             ! " << p << "\n";
  out << "written:     " << h.value("written", "?") << " on " << h.value("host", "?") << "\n";
  out << "command:     " << h.value("command", "") << "\n";
  if (h.contains("fault")) out << "fault:       " << h["fault"].dump() << "\n";
  if (h.contains("guardrail") && h["guardrail"].is_object()) {
    const auto& g = h["guardrail"];
    // Each guardrail's own line; records from before several guardrails had only the health probe's fields.
    if (g.contains("summary") && g["summary"].is_array()) {
      for (const auto& line : g["summary"])
        out << "guardrail:   " << (line.is_string() ? line.get<std::string>() : line.dump()) << "\n";
    } else {
      out << "guardrail:   GET " << g.value("health_url", "?") << " every " << g.value("interval", "?")
          << ", healthy if it answers < 400 within " << g.value("max_latency", "?") << "\n";
    }
  }
  if (h.contains("slo") && h["slo"].is_object()) out << "slo:         " << h["slo"].value("text", "") << "\n";
  const auto& steady = h.value("steady_state", nlohmann::json());
  out << "\n  " << std::left << std::setw(8) << "phase" << std::setw(8) << "checks" << std::setw(9) << "healthy"
      << std::setw(10) << "p50" << std::setw(10) << "p90" << std::setw(10) << "p99"
      << "max\n";
  if (rec->verdict && rec->verdict->contains("phases")) {
    const auto& ph = (*rec->verdict)["phases"];
    phase_row(out, "steady", ph.value("steady", nlohmann::json()));
    phase_row(out, "fault", ph.value("fault", nlohmann::json()));
    phase_row(out, "after", ph.value("after", nlohmann::json()));
  } else {
    phase_row(out, "steady", steady.is_object() ? steady.value("summary", nlohmann::json()) : nlohmann::json());
  }
  double lo = 0, hi = 0;
  bool first = true;
  for (const auto& s : rec->samples) {
    if (!s.value("healthy", false) || !s.contains("latency_ms")) continue;
    double v = s.value("latency_ms", 0.0);
    lo = first ? v : std::min(lo, v);
    hi = first ? v : std::max(hi, v);
    first = false;
  }
  out << "\nlatency, one mark per check (" << num_ms(lo) << " to " << num_ms(hi) << ", x = failed):\n  steady "
      << sparkline(rec->samples, "steady", lo, hi) << " | fault " << sparkline(rec->samples, "fault", lo, hi)
      << " | after " << sparkline(rec->samples, "after", lo, hi) << "\n\n";
  if (!rec->verdict) {
    out << "verdict:     none yet (the experiment is still running, or its faultctl was killed before the end)\n";
    return kExitCompleted;
  }
  const auto& v = *rec->verdict;
  std::string name = v.value("verdict", "?");
  for (auto& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  out << "verdict:     " << name << " -- " << v.value("reason", "") << "\n";
  if (v.contains("recovered"))
    out << "recovered:   " << (v.value("recovered", false) ? "yes" : "NO") << " (the after window"
        << (v.contains("slo") ? ", against the guardrail and the slo)" : ", against the guardrail)") << "\n";
  if (v.contains("fault_window"))
    out << "fault ran:   " << v["fault_window"].value("started", "?") << " to " << v["fault_window"].value("ended", "?")
        << "\n";
  return kExitCompleted;
}

}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  return run_command("faultctl report", parse_report_args(args), kRootNever, report);
}

}  // namespace faultline
