// A served run: the request read into the typed experiment, then planned and
// run guarded as `faultctl run` runs a packet fault.
#include "userspace/daemon/served_run.h"

#include "base/exit_code.h"
#include "userspace/daemon/run_service.h"
#include "userspace/faults/packet/run.h"
#include "userspace/guardrails/guardrail_options.h"
#include "userspace/run/guarded_run.h"
#include "userspace/run/outcome.h"

namespace faultline {
namespace {

constexpr const char* kWho = "faultctl run";

Error request_error(const std::string& why) { return input_error(EINVAL, why); }

}  // namespace

nlohmann::json served_run_request(nlohmann::json experiment, AttachMode attach, bool json, const Redactor& redactor,
                                  bool terminal) {
  nlohmann::json r{{"experiment", std::move(experiment)}, {"json", json}, {"terminal", terminal}};
  if (attach != AttachMode::Auto) r["attach"] = attach == AttachMode::Tcx ? "tcx" : "tc";
  if (!redactor.patterns().empty()) r["redact_patterns"] = redactor.patterns();
  if (!redactor.enabled()) r["no_redact"] = true;
  return r;
}

Result<ServedRun> served_run_from_json(const nlohmann::json& body) {
  const char* shape =
      "a run request is {\"experiment\": {a packet experiment, as faultcp takes it}, \"attach\": \"tcx\"|\"tc\", "
      "\"json\": bool, \"redact_patterns\": [strings], \"no_redact\": bool, \"terminal\": bool}";
  if (!body.is_object() || !body.contains("experiment")) return request_error(shape);
  for (const auto& [key, value] : body.items()) {
    if (key == "experiment") continue;
    if (key == "attach") {
      if (!value.is_string() || (value != "tcx" && value != "tc"))
        return request_error("attach (--attach): expected tcx or tc");
    } else if (key == "json" || key == "no_redact" || key == "terminal") {
      if (!value.is_boolean()) return request_error(key + ": must be true or false");
    } else if (key == "redact_patterns") {
      if (!value.is_array()) return request_error("redact_patterns (--redact-pattern): must be an array of strings");
      for (const auto& p : value)
        if (!p.is_string()) return request_error("redact_patterns (--redact-pattern): must be an array of strings");
    } else {
      return request_error("unknown field \"" + key + "\": " + shape);
    }
  }
  const nlohmann::json& spec = body["experiment"];
  if (spec.is_object() && spec.contains("kind") && spec["kind"].is_string() &&
      experiment_family(spec["kind"].get<std::string>()).value_or("packet") != "packet")
    return request_error("spec.kind: faultd serves packet faults; run a " + spec["kind"].get<std::string>() +
                         " fault with faultctl alone");
  auto e = experiment_from_json(spec, "");
  if (!e) return e.error();
  if (e->record) return request_error("spec.hypothesis (--hypothesis): a recorded run is faultctl's to run");
  ServedRun r;
  r.spec = std::get<FaultSpec>(e->fault);
  r.guardrails = std::move(e->guardrails);
  if (body.contains("attach")) r.attach = body["attach"] == "tcx" ? AttachMode::Tcx : AttachMode::Tc;
  r.json = body.value("json", false);
  std::vector<std::string> patterns;
  if (body.contains("redact_patterns")) patterns = body["redact_patterns"].get<std::vector<std::string>>();
  const bool redact = !body.value("no_redact", false);
  if (!redact && !patterns.empty())
    return request_error("redact_patterns and no_redact contradict each other (--redact-pattern, --no-redact)");
  auto red = Redactor::make(patterns, redact);
  if (!red) return request_error("redact_patterns (--redact-pattern): " + red.error().message);
  r.redactor = std::move(*red);
  return r;
}

int run_served(const ServedRun& run, RunStreams& streams) {
  const RunIo& io = streams.io();
  auto fault = PacketRun::plan(run.spec, run.attach);
  if (!fault) {
    io.err << kWho << ": " << fault.error().describe() << "\n";
    return fault.error().bad_input ? kExitBadInput : kExitFailure;
  }
  RunnableFault& watched = streams.hold(**fault);
  auto guardrails = make_guardrails(run.guardrails, watched.netns_inode());
  if (!guardrails) {
    io.err << kWho << ": " << guardrails.error().describe() << "\n";
    return guardrails.error().bad_input ? kExitBadInput : kExitFailure;
  }
  RunOptions o;
  o.json = run.json;
  o.who = kWho;
  o.redactor = run.redactor;
  o.stop = io.stop;
  o.terminal = io.terminal;
  return exit_code(guarded_run(watched, *guardrails, o, io.out, io.err));
}

}  // namespace faultline
