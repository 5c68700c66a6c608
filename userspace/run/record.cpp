// The record folder: hypothesis.json (+ .sha256) before the fault, samples.jsonl during and
// after, verdict.json (+ .sha256) at the end.
#include "userspace/run/record.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <ostream>
#include <sstream>

#include "base/clock.h"
#include "base/process.h"
#include "base/units.h"
#include "userspace/run/record_files.h"
#include "userspace/run/redaction.h"
#include "userspace/state/state_dir.h"

namespace faultline {

using namespace record_files;
namespace {

Status write_file(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return errno_error("cannot create " + path);
  FL_TRY(write_all(fd.get(), text, path));
  if (::fsync(fd.get()) != 0) return errno_error("cannot fsync " + path);
  return {};
}

std::string sha_line(const std::string& sha, const char* file) { return sha + "  " + file + "\n"; }

void sleep_until(uint64_t t_ns, const RecordedRun::StopCheck& stop) {
  while (!stop()) {
    uint64_t now = boottime_ns();
    if (now >= t_ns) return;
    uint64_t left = std::min<uint64_t>(t_ns - now, 100'000'000ULL);
    timespec ts{0, static_cast<long>(left)};
    nanosleep(&ts, nullptr);
  }
}

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

Status check_record_dir(const std::string& dir) {
  if (dir.empty()) return make_error(EINVAL, "--record: empty path");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    std::string parent = dir.substr(0, dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
    if (parent.empty()) parent = dir.front() == '/' ? "/" : ".";
    if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return make_error(ENOENT, "--record " + dir + ": the folder above it does not exist");
    return {};
  }
  if (!S_ISDIR(st.st_mode)) return make_error(ENOTDIR, "--record " + dir + ": exists and is not a folder");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return make_error(errno, "--record " + dir + ": cannot be read");
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") empty = false;
  }
  ::closedir(d);
  if (!empty)
    return make_error(EEXIST,
                      "--record " + dir + ": already holds files; a record is never overwritten, pick a new folder");
  return {};
}

RecordedRun::RecordedRun(RecordOptions opts, Sampler sampler, uint64_t interval_ns, nlohmann::json guardrail,
                         std::ostream& out, bool json)
    : opts_(std::move(opts)),
      sampler_(std::move(sampler)),
      interval_ns_(interval_ns),
      guardrail_(std::move(guardrail)),
      out_(out),
      json_(json) {}

void RecordedRun::emit(const nlohmann::json& event, const std::string& text) {
  if (json_)
    out_ << redact_json(opts_.redactor, event).dump() << std::endl;
  else
    out_ << opts_.redactor.text(text) << std::endl;
}

void RecordedRun::append(const std::string& phase, const GuardrailReading& s) {
  if (!samples_fd_) return;
  nlohmann::json j{{"phase", phase},
                   {"t_s", std::round(static_cast<double>(s.t_ns - origin_ns_) / 1e6) / 1e3},
                   {"healthy", s.healthy}};
  for (const auto& [k, v] : s.values) j[k] = v;
  if (!s.problem.empty()) j["problem"] = s.problem;
  std::string line = redact_json(opts_.redactor, j).dump() + "\n";
  // One write per line, so a kill -9 leaves whole lines behind.
  (void)!::write(samples_fd_.get(), line.data(), line.size());
}

std::vector<GuardrailReading> RecordedRun::sample_window(const std::string& phase, const StopCheck& stop) {
  std::vector<GuardrailReading> out;
  const uint64_t start = boottime_ns();
  for (uint64_t k = 0;; ++k) {
    uint64_t at = start + k * interval_ns_;
    if (k > 0 && at >= start + opts_.steady_state_ns) break;
    sleep_until(at, stop);
    if (stop()) break;
    GuardrailReading s = sampler_();
    append(phase, s);
    out.push_back(std::move(s));
  }
  return out;
}

Result<bool> RecordedRun::before_fault(const nlohmann::json& spec, const StopCheck& stop) {
  origin_ns_ = boottime_ns();
  const double started_wall = wall_seconds();
  if (!opts_.dir.empty()) {
    FL_TRY(check_record_dir(opts_.dir));
    if (::mkdir(opts_.dir.c_str(), 0755) != 0 && errno != EEXIST)
      return errno_error("cannot create record folder " + opts_.dir);
    std::string path = opts_.dir + "/" + kSamples;
    samples_fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644));
    if (!samples_fd_) return errno_error("cannot create " + path);
  }
  nlohmann::json steady = nullptr;
  bool inside = true;
  std::string why;
  if (opts_.steady_state_ns > 0) {
    if (!json_)
      out_ << "measuring the steady state for " << format_duration(opts_.steady_state_ns)
           << " before injecting anything" << std::endl;
    steady_ = sample_window("steady", stop);
    if (stop()) return make_error(EINTR, "interrupted while measuring the steady state; nothing was injected");
    SignalSummary sum = summarize(steady_);
    steady = {{"window_s", static_cast<double>(opts_.steady_state_ns) / 1e9},
              {"interval_s", static_cast<double>(interval_ns_) / 1e9},
              {"started", iso8601(started_wall)},
              {"summary", sum.to_json()}};
    if (sum.healthy < sum.samples) {
      inside = false;
      auto bad = std::find_if(steady_.begin(), steady_.end(), [](const GuardrailReading& s) { return !s.healthy; });
      why = "the guardrail failed " + std::to_string(sum.samples - sum.healthy) + " of " + std::to_string(sum.samples) +
            " steady-state checks (" + bad->problem + ")";
    }
    if (opts_.slo) {
      SloResult r = evaluate(*opts_.slo, steady_);
      steady["slo"] = {{"value", r.value ? nlohmann::json(ms_json(r.value)) : nlohmann::json(nullptr)}, {"met", r.met}};
      if (!r.met && inside) {
        inside = false;
        why = "the steady state already misses the hypothesis: " + r.describe(*opts_.slo);
      }
    }
    steady["within_guardrail"] = inside;
    nlohmann::json ev{{"event", "steady_state"}, {"within_guardrail", inside}, {"summary", sum.to_json()}};
    if (!inside) ev["problem"] = why;
    emit(ev, "steady state: " + std::to_string(sum.samples) + " checks, " + fixed(sum.success_percent, 1) +
                 "% healthy, p50 " + ms_text(sum.p50_ms) + ", p99 " + ms_text(sum.p99_ms) +
                 (inside ? "" : " -- " + why));
  }
  if (!opts_.dir.empty()) {
    nlohmann::json h;
    h["faultline_record"] = 1;
    h["hypothesis"] = opts_.hypothesis;
    h["command"] = opts_.command_line;
    h["fault"] = spec;
    h["guardrail"] = guardrail_;
    h["slo"] = opts_.slo ? opts_.slo->to_json() : nlohmann::json(nullptr);
    h["steady_state"] = steady;
    h["host"] = hostname();
    h["boot_id"] = boot_id();
    h["written"] = iso8601(wall_seconds());
    // Secrets never reach the record; that they were kept out (or not) is recorded.
    h["redaction"] = opts_.redactor.enabled()
                         ? nlohmann::json{{"enabled", true}, {"patterns", opts_.redactor.patterns()}}
                         : nlohmann::json{{"enabled", false}, {"why", "--no-redact"}};
    std::string text = redact_json(opts_.redactor, h).dump(2) + "\n";
    hypothesis_sha_ = sha256_hex(text);
    FL_TRY(write_file(opts_.dir + "/" + kHypothesis, text));
    FL_TRY(write_file(opts_.dir + "/" + kHypothesisSha, sha_line(hypothesis_sha_, kHypothesis)));
    emit(
        {{"event", "hypothesis_recorded"}, {"record", opts_.dir}, {"sha256", hypothesis_sha_}},
        "hypothesis recorded before the fault: sha256 " + hypothesis_sha_ + " (" + opts_.dir + "/" + kHypothesis + ")");
  }
  if (!inside) {
    refusal_ = why;
    write_verdict(HypothesisVerdict::Aborted, "refused to start: " + why + "; nothing was injected",
                  RunOutcome::Guardrail, why);
    return false;
  }
  return true;
}

void RecordedRun::fault_started() {
  fault_start_ns_ = boottime_ns();
  fault_start_wall_ = wall_seconds();
}

void RecordedRun::fault_sample(const GuardrailReading& s) {
  append("fault", s);
  fault_.push_back(s);
}

void RecordedRun::fault_ended() {
  fault_end_ns_ = boottime_ns();
  fault_end_wall_ = wall_seconds();
}

HypothesisVerdict RecordedRun::after_fault(RunOutcome outcome, const std::string& detail, const StopCheck& stop,
                                           const std::optional<std::string>& untested) {
  if (fault_end_ns_ == 0) fault_ended();
  if (opts_.steady_state_ns > 0 && !stop()) {
    if (!json_) out_ << "observing recovery for " << format_duration(opts_.steady_state_ns) << std::endl;
    after_ = sample_window("after", stop);
  }
  HypothesisVerdict v = HypothesisVerdict::Held;
  std::string reason;
  switch (outcome) {
    case RunOutcome::Guardrail:
      v = HypothesisVerdict::Aborted;
      reason = "the guardrail was breached and the fault ended early: " + detail;
      break;
    case RunOutcome::Interrupted:
    case RunOutcome::AbortedFromOutside:
    case RunOutcome::Failed:
    case RunOutcome::BadInput:
      v = HypothesisVerdict::Aborted;
      reason = "the run did not complete: " + detail;
      break;
    case RunOutcome::Completed:
      if (untested) {
        // Whatever the guardrail and the SLO saw, the fault had no part in it.
        v = HypothesisVerdict::Untested;
        reason = *untested;
      } else if (opts_.slo) {
        SloResult r = evaluate(*opts_.slo, fault_);
        v = r.met ? HypothesisVerdict::Held : HypothesisVerdict::Refuted;
        reason = std::string(r.met ? "within" : "outside") +
                 " the hypothesis during the fault: " + r.describe(*opts_.slo) + "; the guardrail held";
      } else {
        SignalSummary s = summarize(fault_);
        reason = "the guardrail held through " + std::to_string(s.samples) + " checks during the fault";
      }
      break;
  }
  return write_verdict(v, reason, outcome, detail, untested);
}

HypothesisVerdict RecordedRun::write_verdict(HypothesisVerdict v, const std::string& reason, RunOutcome outcome,
                                             const std::string& detail, const std::optional<std::string>& untested) {
  nlohmann::json j;
  j["verdict"] = hypothesis_verdict_name(v);
  j["reason"] = reason;
  j["outcome"] = outcome_name(outcome);
  if (!detail.empty()) j["detail"] = detail;
  if (untested) j["untested"] = *untested;
  j["hypothesis"] = opts_.hypothesis;
  j["phases"] = {{"steady", summarize(steady_).to_json()},
                 {"fault", summarize(fault_).to_json()},
                 {"after", summarize(after_).to_json()}};
  if (fault_start_ns_ != 0) {
    j["fault_window"] = {{"started", iso8601(fault_start_wall_)},
                         {"ended", iso8601(fault_end_wall_)},
                         {"start_s", std::round(static_cast<double>(fault_start_ns_ - origin_ns_) / 1e6) / 1e3},
                         {"end_s", std::round(static_cast<double>(fault_end_ns_ - origin_ns_) / 1e6) / 1e3}};
  }
  if (fault_counters_.is_object() && !fault_counters_.empty()) j["fault_counters"] = fault_counters_;
  if (guardrail_outcomes_.is_object() && !guardrail_outcomes_.empty()) j["guardrail_outcomes"] = guardrail_outcomes_;
  bool recovered =
      !after_.empty() && std::all_of(after_.begin(), after_.end(), [](const GuardrailReading& s) { return s.healthy; });
  if (opts_.slo) {
    SloResult f = evaluate(*opts_.slo, fault_), a = evaluate(*opts_.slo, after_);
    j["slo"] = {{"text", opts_.slo->text},
                {"fault", {{"value", ms_json(f.value)}, {"met", f.met}, {"text", f.describe(*opts_.slo)}}},
                {"after", {{"value", ms_json(a.value)}, {"met", a.met}, {"text", a.describe(*opts_.slo)}}}};
    recovered = recovered && a.met;
  }
  if (!after_.empty()) j["recovered"] = recovered;
  j["written"] = iso8601(wall_seconds());
  if (!opts_.dir.empty()) {
    j["hypothesis_sha256"] = hypothesis_sha_;
    samples_fd_.reset();
    auto samples = read_text_file(opts_.dir + "/" + kSamples);
    j["samples_sha256"] = sha256_hex(samples ? *samples : "");
    std::string text = redact_json(opts_.redactor, j).dump(2) + "\n";
    (void)write_file(opts_.dir + "/" + kVerdict, text);
    (void)write_file(opts_.dir + "/" + kVerdictSha, sha_line(sha256_hex(text), kVerdict));
  }
  std::string upper = hypothesis_verdict_name(v);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  nlohmann::json ev = j;
  ev["event"] = "verdict";
  if (!opts_.dir.empty()) ev["record"] = opts_.dir;
  std::string text = "verdict: " + upper + " -- " + reason;
  if (!after_.empty())
    text += std::string("\nrecovered: ") + (recovered ? "yes" : "NO") +
            " (after window: " + fixed(summarize(after_).success_percent, 1) + "% healthy, p99 " +
            ms_text(summarize(after_).p99_ms) + ")";
  if (!opts_.dir.empty()) text += "\nrecord: " + opts_.dir + " (faultctl report " + opts_.dir + ")";
  emit(ev, text);
  return v;
}

}  // namespace faultline
