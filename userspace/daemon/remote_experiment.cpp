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
#include "base/seeded_random.h"
#include "userspace/faults/packet/run.h"
#include "userspace/faults/resource/experiment_spec.h"
#include "userspace/faults/resource/run.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/faults/stream/experiment_spec.h"
#include "userspace/faults/stream/run.h"
#include "userspace/faults/syscall/experiment_spec.h"
#include "userspace/faults/syscall/run.h"
#include "userspace/guardrails/http.h"
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

// Guardrails and the record, the same for every kind: the configurations
// `faultctl run` makes of its flags.
Result<RemotePlan> plan_guardrails(const nlohmann::json& spec, const std::string& netns, const std::string& record_dir,
                                   RemotePlan p) {
  auto str = [&](const char* f) { return spec_string(spec, f); };
  auto uint_field = [&](const char* f, uint64_t lo, uint64_t hi) { return spec_uint(spec, f, lo, hi); };
  auto number = [&](const char* f) { return spec_number(spec, f); };
  std::optional<uint64_t> interval;
  if (spec.contains("interval_sec")) {
    auto i = uint_field("interval_sec", 1, 600);
    if (!i) return i.error();
    interval = *i * 1'000'000'000ULL;
  }
  if (spec.contains("health_url")) {
    HealthProbeConfig h;
    auto url = str("health_url");
    if (!url) return url.error();
    if (auto u = parse_http_url(*url); !u) return spec_field_error("health_url", u.error().message);
    h.url = *url;
    h.netns = netns;
    if (interval) h.interval_ns = *interval;
    if (spec.contains("health_max_latency_ms")) {
      auto l = uint_field("health_max_latency_ms", 1, 60'000);
      if (!l) return l.error();
      h.max_latency_ns = *l * 1'000'000ULL;
    }
    p.guardrails.health = h;
  } else if (spec.contains("health_max_latency_ms")) {
    return spec_field_error("health_max_latency_ms", "needs health_url");
  }
  if (spec.contains("kernel_signal")) {
    KernelSignalConfig k;
    auto sig = str("kernel_signal");
    if (!sig) return sig.error();
    if (!is_kernel_signal(*sig)) return spec_field_error("kernel_signal", "must be tcp_retransmits or tcp_resets");
    k.signal = *sig;
    if (!spec.contains("abort_above"))
      return spec_field_error("abort_above", "a kernel signal guardrail needs abort_above");
    auto above = number("abort_above");
    if (!above) return above.error();
    k.abort_above = *above;
    k.netns = netns;
    p.guardrails.kernel_signal = k;
  }
  if (spec.contains("query") != spec.contains("prometheus_url"))
    return spec_field_error(spec.contains("query") ? "prometheus_url" : "query",
                            "a Prometheus guardrail needs both prometheus_url and query");
  if (spec.contains("query")) {
    PrometheusGuardrailConfig q;
    auto url = str("prometheus_url");
    if (!url) return url.error();
    auto query = str("query");
    if (!query) return query.error();
    q.polling.endpoint.url = *url;
    if (interval) q.polling.interval_ns = *interval;
    q.query = *query;
    // With a kernel signal too, abort_above is the signal's (the control
    // plane's model has one pair of limits); a query then takes abort_below.
    if (spec.contains("abort_above") && !spec.contains("kernel_signal")) {
      auto a = number("abort_above");
      if (!a) return a.error();
      q.abort_above = *a;
    }
    if (spec.contains("abort_below")) {
      auto b = number("abort_below");
      if (!b) return b.error();
      q.abort_below = *b;
    }
    if (!q.abort_above && !q.abort_below) return spec_field_error("query", "needs abort_above or abort_below");
    p.guardrails.prometheus = q;
  }
  if (spec.contains("hypothesis")) {
    if (!p.guardrails.any())
      return spec_field_error("hypothesis",
                              "a recorded hypothesis needs a guardrail signal: health_url, query or kernel_signal");
    auto h = str("hypothesis");
    if (!h) return h.error();
    RecordOptions r;
    r.hypothesis = *h;
    r.dir = record_dir;
    if (spec.contains("steady_state_sec")) {
      auto ss = uint_field("steady_state_sec", 0, 600);
      if (!ss) return ss.error();
      r.steady_state_ns = *ss * 1'000'000'000ULL;
    }
    r.command_line = "faultcp experiment (" + spec.dump() + ")";
    p.record = r;
  }
  return p;
}

}  // namespace

Result<RemotePlan> plan_remote_experiment(const nlohmann::json& spec, const std::string& record_dir) {
  if (!spec.is_object()) return input_error(0, "spec: not a JSON object");
  // The control plane checked the spec (types, caps, combinations) before it
  // stored it; these checks keep a spec from an older or newer faultcp honest.
  static const char* kCommon[] = {
      "kind",        "duration_sec", "interval_sec",  "health_url", "health_max_latency_ms", "prometheus_url", "query",
      "abort_above", "abort_below",  "kernel_signal", "hypothesis", "steady_state_sec"};
  static const char* kPacket[] = {"dev", "target", "delay_ms", "jitter_ms", "percent", "netns"};
  auto str = [&](const char* f) { return spec_string(spec, f); };
  auto uint_field = [&](const char* f, uint64_t lo, uint64_t hi) { return spec_uint(spec, f, lo, hi); };
  auto number = [&](const char* f) { return spec_number(spec, f); };

  RemotePlan p;
  if (!spec.contains("kind")) return spec_field_error("kind", "is required");
  auto kind_text = str("kind");
  if (!kind_text) return kind_text.error();
  std::string netns;  // where the health probe and kernel signal look: the fault's namespace
  const bool is_syscall = *kind_text == "syscall";
  const bool is_tcp = *kind_text == "tcp";
  const bool is_http = *kind_text == "http";
  if (is_syscall || is_tcp || is_http || is_resource_kind(*kind_text)) {
    const auto family = is_syscall ? syscall_spec_fields()
                        : is_tcp   ? tcp_spec_fields()
                        : is_http  ? http_spec_fields()
                                   : resource_spec_fields();
    for (const auto& [key, value] : spec.items()) {
      if (std::find(std::begin(kCommon), std::end(kCommon), key) == std::end(kCommon) &&
          std::find(family.begin(), family.end(), key) == family.end())
        return spec_field_error(key, "not a field of a " + *kind_text + " experiment this faultd runs");
    }
    if (is_syscall) {
      auto sc = syscall_spec_from_json(spec);
      if (!sc) return sc.error();
      p.fault = std::move(*sc);
    } else if (is_http) {
      auto hs = http_spec_from_json(spec);  // the same TcpFaultSpec `faultctl run http` builds
      if (!hs) return hs.error();
      p.fault = std::move(*hs);
    } else if (is_tcp) {
      auto tc = tcp_spec_from_json(spec);
      if (!tc) return tc.error();
      p.fault = std::move(*tc);
    } else {
      auto rs = resource_spec_from_json(spec);
      if (!rs) return rs.error();
      p.fault = std::move(*rs);
    }
    return plan_guardrails(spec, netns, record_dir, std::move(p));
  }
  for (const auto& [key, value] : spec.items()) {
    if (std::find(std::begin(kCommon), std::end(kCommon), key) == std::end(kCommon) &&
        std::find(std::begin(kPacket), std::end(kPacket), key) == std::end(kPacket))
      return spec_field_error(key, "not a field this faultd runs");
  }
  FaultSpec& s = p.fault.emplace<FaultSpec>();
  auto kind = kind_from_name(*kind_text);
  if (!kind || *kind == FaultKind::Dns)
    return spec_field_error("kind", "'" + *kind_text + "' is not a fault this faultd runs");
  s.kind = *kind;
  if (!spec.contains("target")) return spec_field_error("target", "is required");
  auto target = str("target");
  if (!target) return target.error();
  auto prefix = parse_prefix(*target);
  if (!prefix) return spec_field_error("target", prefix.error().message);
  s.targets = {*prefix};
  if (!spec.contains("duration_sec")) return spec_field_error("duration_sec", "is required");
  auto duration = uint_field("duration_sec", 1, FaultCaps::kMaxDurationNs / 1'000'000'000ULL);
  if (!duration) return duration.error();
  s.duration_ns = *duration * 1'000'000'000ULL;
  if (spec.contains("dev")) {
    auto dev = str("dev");
    if (!dev) return dev.error();
    s.dev = *dev;
  }
  if (spec.contains("netns")) {
    auto ns = str("netns");
    if (!ns) return ns.error();
    s.netns = *ns;
  }
  if (spec.contains("delay_ms")) {
    auto d = uint_field("delay_ms", 0, FaultCaps::kMaxDelayNs / 1'000'000);
    if (!d) return d.error();
    s.delay_ns = *d * 1'000'000ULL;
  }
  if (spec.contains("jitter_ms")) {
    auto j = uint_field("jitter_ms", 0, FaultCaps::kMaxJitterNs / 1'000'000);
    if (!j) return j.error();
    s.jitter_ns = *j * 1'000'000ULL;
  }
  if (spec.contains("percent")) {
    auto pc = number("percent");
    if (!pc) return pc.error();
    s.percent = *pc;
  }
  if (kind_is_random(s.kind)) {
    s.seed = draw_seed();
    s.seed_drawn = true;
  }
  if (auto v = validate(s); !v)
    return spec_field_error(s.kind == FaultKind::Latency ? "delay_ms" : "kind", v.error().message);
  netns = s.netns;
  return plan_guardrails(spec, netns, record_dir, std::move(p));
}

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

  auto plan = plan_remote_experiment(spec, record_dir);
  if (!plan) {
    ending.type = "failed";
    ending.detail = plan.error().describe();
    ending.record = {{"outcome", "bad-input"}, {"exit_code", kExitBadInput}};
    return finish(ending);
  }
  // The kind's run, planned as `faultctl run` plans it (nothing touched yet).
  std::ostringstream warnings;  // a syscall or tcp fault's "not registered" line, for the record
  Result<std::unique_ptr<RunnableFault>> fault = input_error(EINVAL, "no fault");
  TcpRun* tcp = nullptr;  // a tcp run's connections may drain after the record
  if (const auto* packet = std::get_if<FaultSpec>(&plan->fault)) {
    if (auto f = PacketRun::plan(*packet, AttachMode::Auto); f)
      fault = std::unique_ptr<RunnableFault>(std::move(*f));
    else
      fault = f.error();
  } else if (const auto* sc = std::get_if<SyscallFaultSpec>(&plan->fault)) {
    if (auto f = SyscallRun::plan(*sc, warnings); f)
      fault = std::unique_ptr<RunnableFault>(std::move(*f));
    else
      fault = f.error();
  } else if (const auto* tc = std::get_if<TcpFaultSpec>(&plan->fault)) {
    auto t = std::make_unique<TcpRun>(*tc, warnings);
    tcp = t.get();
    fault = std::unique_ptr<RunnableFault>(std::move(t));
  } else if (const auto* rs = std::get_if<ResourceSpec>(&plan->fault)) {
    if (auto f = ResourceRun::plan(*rs); f) {
      if (plan->record) (*f)->set_record_dir(record_dir);
      fault = std::unique_ptr<RunnableFault>(std::move(*f));
    } else {
      fault = f.error();
    }
  }
  if (!fault) {
    ending.type = "failed";
    ending.detail = fault.error().describe();
    ending.record = {{"outcome", fault.error().bad_input ? "bad-input" : "failed"},
                     {"exit_code", fault.error().bad_input ? kExitBadInput : kExitFailure}};
    return finish(ending);
  }
  StoppableFault stoppable(**fault, *this);
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
