// A dispatched experiment: spec -> fault spec and guardrails, its run
// (PacketRun, SyscallRun or ResourceRun) under guarded_run() on a thread, its
// JSON lines read back as they are written.
#include "userspace/daemon/remote_experiment.h"

#include <cmath>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <streambuf>

#include "base/files.h"
#include "userspace/faults/stream/run.h"
#include "userspace/ops/experiment_run.h"
#include "userspace/run/guarded_run.h"

namespace faultline {

// The control plane's stop, seen by the run loop as an abort from outside:
// check() reports it and the loop ends the fault at once (within its tick).
class StoppableFault final : public RunnableFault {
 public:
  StoppableFault(RunnableFault& inner, RemoteExperiment& owner) : inner_(inner), owner_(owner) {}
  [[nodiscard]] std::string summary() const override { return inner_.summary(); }
  [[nodiscard]] nlohmann::json plan() const override { return inner_.plan(); }
  [[nodiscard]] std::string dry_run_text() const override { return inner_.dry_run_text(); }
  [[nodiscard]] uint32_t netns_inode() const override { return inner_.netns_inode(); }
  [[nodiscard]] Result<FaultStart> apply() override { return inner_.apply(); }
  [[nodiscard]] std::optional<FaultEnding> check() override {
    {
      std::lock_guard<std::mutex> lock(owner_.mu_);
      if (owner_.stop_why_) return FaultEnding{RunOutcome::AbortedFromOutside, *owner_.stop_why_, std::nullopt};
    }
    return inner_.check();
  }
  [[nodiscard]] FaultObservation observe() override { return inner_.observe(); }
  [[nodiscard]] Status end(std::string_view reason) override { return inner_.end(reason); }
  void describe_end(bool ended, FaultObservation& obs) const override { inner_.describe_end(ended, obs); }
  [[nodiscard]] std::optional<std::string> touched_nothing() const override { return inner_.touched_nothing(); }

 private:
  RunnableFault& inner_;
  RemoteExperiment& owner_;
};

namespace {

constexpr size_t kMaxSamples = 200;            // the last readings kept in the record
constexpr size_t kMaxRecordBytes = 48 * 1024;  // under faultcp's 64 KiB body limit

// A stream whose every whole line goes to a callback.
class LineBuf final : public std::streambuf {
 public:
  explicit LineBuf(std::function<void(const std::string&)> each) : each_(std::move(each)) {}
  ~LineBuf() override {
    if (!line_.empty()) each_(line_);
  }

 protected:
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    if (c == '\n') {
      each_(line_);
      line_.clear();
    } else {
      line_.push_back(static_cast<char>(c));
    }
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) overflow(traits_type::to_int_type(s[i]));
    return n;
  }

 private:
  std::function<void(const std::string&)> each_;
  std::string line_;
};

const char* event_type(const RunResult& r) {
  switch (r.outcome) {
    case RunOutcome::Completed:
      return "completed";
    case RunOutcome::Guardrail:
      return "aborted-by-slo";
    default:
      return "failed";
  }
}

}  // namespace

std::unique_ptr<RemoteExperiment> RemoteExperiment::start(int64_t id, nlohmann::json spec, std::string record_dir,
                                                          Hooks hooks) {
  std::unique_ptr<RemoteExperiment> e(new RemoteExperiment(id, std::move(hooks)));
  RemoteExperiment* self = e.get();
  e->thread_ = std::thread([self, spec = std::move(spec), dir = std::move(record_dir)] { self->run(spec, dir); });
  return e;
}

RemoteExperiment::~RemoteExperiment() {
  stop("faultd is stopping");
  join();
}

void RemoteExperiment::stop(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stop_why_) stop_why_ = why;
}

void RemoteExperiment::join() {
  if (thread_.joinable()) thread_.join();
}

void RemoteExperiment::run(const nlohmann::json& spec, const std::string& record_dir) {
  RemoteEnding ending;
  nlohmann::json samples = nlohmann::json::array();
  size_t sample_count = 0;
  nlohmann::json started, ended, verdict;
  auto finish = [&](RemoteEnding e) {
    hooks_.ended(e);  // the report is queued before the run counts as finished
    finished_.store(true);
  };

  auto plan = experiment_from_json(spec, record_dir);
  if (!plan) {
    ending.type = "failed";
    ending.detail = plan.error().describe();
    ending.record = {{"outcome", "bad-input"}, {"exit_code", kExitBadInput}};
    return finish(ending);
  }
  // The kind's run, planned as `faultctl run` plans it (nothing touched yet).
  std::ostringstream warnings;  // a syscall or tcp fault's "not registered" line, for the record
  auto fault = plan_experiment(*plan, record_dir, warnings);
  if (!fault) {
    ending.type = "failed";
    ending.detail = fault.error().describe();
    ending.record = {{"outcome", fault.error().bad_input ? "bad-input" : "failed"},
                     {"exit_code", fault.error().bad_input ? kExitBadInput : kExitFailure}};
    return finish(ending);
  }
  TcpRun* tcp = fault->tcp;  // a tcp run's connections may drain after the record
  StoppableFault stoppable(*fault->fault, *this);
  auto guardrails = make_guardrails(plan->guardrails, stoppable.netns_inode());
  if (!guardrails) {
    ending.type = "failed";
    ending.detail = guardrails.error().describe();
    ending.record = {{"outcome", "bad-input"}, {"exit_code", kExitBadInput}};
    return finish(ending);
  }

  RunOptions opts;
  opts.json = true;
  opts.record = plan->record;
  opts.who = "faultd: experiment " + std::to_string(id_);
  std::string errors;
  RunResult result;
  {
    LineBuf out_buf([&](const std::string& text) {
      auto line = nlohmann::json::parse(text, nullptr, false);
      if (line.is_discarded() || !line.is_object()) return;
      const std::string ev = line.value("event", "");
      if (ev == "started") {
        started = line;
        const auto id = line.value("id", nlohmann::json());
        // A packet fault's id is a number; a syscall session's ("s2") and a
        // resource fault's ("r7") are strings, which `faultctl abort` takes as they are.
        const std::string fault_id = id.is_number()   ? std::to_string(id.get<uint64_t>())
                                     : id.is_string() ? id.get<std::string>()
                                                      : id.dump();
        if (hooks_.started) hooks_.started(fault_id, 0);
      } else if (ev == "ended") {
        ended = line;
      } else if (ev == "verdict") {
        verdict = line;
      } else if (ev != "progress" && ev != "fault_ended" && ev != "hypothesis_recorded" && ev != "steady_state") {
        ++sample_count;
        samples.push_back(line);
        if (samples.size() > kMaxSamples) samples.erase(samples.begin());
      }
      if (hooks_.line) hooks_.line(line);
    });
    LineBuf err_buf([&](const std::string& text) { errors += (errors.empty() ? "" : "\n") + text; });
    std::ostream out(&out_buf), err(&err_buf);
    result = guarded_run(stoppable, *guardrails, opts, out, err);
    out.flush();
  }

  ending.type = event_type(result);
  ending.detail = result.detail;
  if (ending.detail.empty() && result.outcome != RunOutcome::Completed) ending.detail = errors;
  nlohmann::json& r = ending.record;
  if (!warnings.str().empty()) r["warnings"] = warnings.str();
  r["outcome"] = outcome_name(result.outcome);
  r["exit_code"] = exit_code(result);
  if (!started.is_null()) r["started"] = started;
  if (!ended.is_null()) r["ended"] = ended;
  if (result.verdict) r["verdict"] = hypothesis_verdict_name(*result.verdict);
  if (result.untested) r["untested"] = *result.untested;
  if (!verdict.is_null()) r["verdict_record"] = verdict;
  if (plan->record && !record_dir.empty()) {
    // The fingerprinted hypothesis, written before the fault.
    if (auto h = read_text_file(record_dir + "/hypothesis.json")) {
      auto hj = nlohmann::json::parse(*h, nullptr, false);
      r["hypothesis"] = hj.is_discarded() ? nlohmann::json(*h) : hj;
      r["hypothesis_sha256"] = sha256_hex(*h);
    }
    r["record_dir"] = record_dir;
  }
  r["samples"] = samples;
  r["sample_count"] = sample_count;
  while (r.dump().size() > kMaxRecordBytes && !r["samples"].empty()) r["samples"].erase(r["samples"].begin());
  // As faultctl run tcp: the connections released at the end may finish (at
  // most the spec's drain time) before the report; the fault itself is off.
  if (tcp != nullptr) {
    if (const size_t left = tcp->drain(); left != 0) r["drain_closed"] = left;
  }
  finish(ending);
}

}  // namespace faultline
