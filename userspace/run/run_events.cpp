// The text and JSON readers of a run's events.
#include "userspace/run/run_events.h"

#include <unistd.h>

#include <ostream>

#include "base/units.h"
#include "userspace/run/redaction.h"

namespace faultline {
namespace {

constexpr uint64_t kStatusFileEveryS = 5;

// Packet fault ids are numbers in JSON ({"id": 3}), as `faultctl status` has
// always shown them; resource and syscall ids are strings ("r7", "s2").
nlohmann::json id_json(const std::string& id) {
  if (!id.empty() && id.find_first_not_of("0123456789") == std::string::npos) return std::stoull(id);
  return id;
}

void merge_fields(nlohmann::json& into, const nlohmann::json& fields) {
  if (fields.is_object()) into.update(fields);
}

// What both readers share: the error line.
class Printer : public RunEvents {
 public:
  Printer(const RunOptions& o, std::ostream& out, std::ostream& err)
      : who_(o.who), redactor_(o.redactor), out_(out), err_(err) {}

  void error(const std::string& what) override { err_ << who_ << ": " << redactor_.text(what) << "\n"; }

 protected:
  std::string who_;
  const Redactor& redactor_;
  std::ostream& out_;
  std::ostream& err_;
};

// JSON lines on stdout: each event one object with "event" naming it.
class JsonEvents final : public Printer {
 public:
  using Printer::Printer;

  void dry_run(const RunnableFault& fault, const Guardrails& guardrails,
               const std::optional<RecordOptions>& record) override {
    nlohmann::json j = fault.plan();
    j["dry_run"] = true;
    if (!guardrails.empty()) j["guardrail"] = describe_all(guardrails);
    if (record) j["record"] = {{"dir", record->dir}, {"steady_state", format_duration(record->steady_state_ns)}};
    emit(j);
  }
  void started(const FaultStart& s, const Guardrails& guardrails) override {
    nlohmann::json j = s.event;
    j["event"] = "started";
    j["id"] = id_json(s.id);
    if (!guardrails.empty()) j["guardrail"] = describe_all(guardrails);
    emit(j);
  }
  void reading(const Guardrail& g, const GuardrailReading& r) override { emit(g.event(r)); }
  void watch_ended() override {}
  void ended_early(const std::string& id, const FaultEnding& e) override {
    nlohmann::json j{{"event", "fault_ended"}, {"id", id_json(id)}, {"reason", outcome_name(e.outcome)}};
    if (!e.detail.empty()) j["detail"] = e.detail;
    emit(j);
  }
  void progress(const std::string& id, const std::string&, uint64_t left_s, bool, const FaultObservation& o) override {
    nlohmann::json j{{"event", "progress"}, {"id", id_json(id)}, {"left_s", left_s}};
    merge_fields(j, o.fields);
    emit(j);
  }
  void ended(const std::string& id, const RunResult& r, const std::string& breached_by,
             const FaultObservation& last) override {
    nlohmann::json j{
        {"event", "ended"}, {"id", id_json(id)}, {"reason", outcome_name(r.outcome)}, {"exit_code", exit_code(r)}};
    if (!r.detail.empty()) j["detail"] = r.detail;
    if (!breached_by.empty()) j["guardrail"] = breached_by;
    if (r.untested) {
      j["untested"] = true;
      j["warning"] = *r.untested;
    }
    merge_fields(j, last.fields);
    emit(j);
  }

 private:
  void emit(const nlohmann::json& j) { out_ << redact_json(redactor_, j).dump() << std::endl; }
};

// Lines for people: on stdout (stderr when a wrapped command owns stdout); the
// status line on stderr, rewritten in place on a terminal, or every
// kStatusFileEveryS-th second to a file, so logs stay readable.
class TextEvents final : public Printer {
 public:
  TextEvents(const RunOptions& o, std::ostream& out, std::ostream& err, bool command)
      : Printer(o, out, err), info_(command ? err : out), tty_(o.terminal.value_or(::isatty(STDERR_FILENO) != 0)) {}

  void dry_run(const RunnableFault& fault, const Guardrails&, const std::optional<RecordOptions>&) override {
    out_ << redactor_.text(fault.dry_run_text()) << "nothing was changed.\n";
  }
  void started(const FaultStart& s, const Guardrails& guardrails) override {
    say(s.text);
    for (const auto& g : guardrails) say("guardrail: " + g->summary());
  }
  void reading(const Guardrail&, const GuardrailReading&) override {}  // a breach is said by ended()
  void ended_early(const std::string& id, const FaultEnding& e) override {
    say("fault " + id + " ended (" + outcome_name(e.outcome) + (e.detail.empty() ? "" : ": " + e.detail) +
        "); the command runs on");
  }
  void progress(const std::string& id, const std::string& summary, uint64_t left_s, bool ended,
                const FaultObservation& o) override {
    const std::string when = ended ? "ended, waiting for the command" : std::to_string(left_s) + "s left";
    const std::string line = "[" + id + " " + summary + "] " + when + " | " + o.text;
    if (tty_) {
      err_ << "\r\033[K" << redactor_.text(line) << std::flush;
      dirty_ = true;
    } else if (status_calls_++ % kStatusFileEveryS == 0) {
      err_ << redactor_.text(line) << "\n";
    }
  }
  void watch_ended() override {
    if (dirty_) err_ << "\r\033[K" << std::flush;
    dirty_ = false;
  }
  void ended(const std::string& id, const RunResult& r, const std::string&, const FaultObservation& last) override {
    say("fault " + id + " ended (" + outcome_name(r.outcome) + (r.detail.empty() ? "" : ": " + r.detail) +
        "): " + last.text);
    if (r.outcome == RunOutcome::Guardrail) error("guardrail breached, fault ended: " + r.detail);
  }

 private:
  void say(const std::string& line) { info_ << redactor_.text(line) << std::endl; }

  std::ostream& info_;
  bool tty_;
  bool dirty_ = false;  // a status line is on the terminal
  uint64_t status_calls_ = 0;
};

}  // namespace

std::unique_ptr<RunEvents> make_run_events(const RunOptions& o, std::ostream& out, std::ostream& err, bool command) {
  if (o.json) return std::make_unique<JsonEvents>(o, out, err);
  return std::make_unique<TextEvents>(o, out, err, command);
}

}  // namespace faultline
