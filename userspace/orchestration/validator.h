// The validator: whether automation may run one fault on one service now. It
// reads every fact itself (FactSource, Clock) and trusts nothing a proposal
// claims about the service; each refusal is a code and a sentence.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "userspace/orchestration/clock.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/service.h"

namespace faultline {

// The catalogue's templates (catalogue.h), by what the validator asks of them.
enum class FaultClass {
  Dependency,  // upstream_delay, upstream_partition, upstream_http_error, llm_provider_overloaded: on a target it calls
  Kill,        // process_kill_one: takes an instance away
  Local,       // cpu_stress_one: on one instance, nothing taken away
};

struct Proposal {
  std::string service;
  std::string fault;   // a template name
  std::string target;  // "host:port" of a dependency (Dependency faults); else empty
  int64_t duration_s = 0;
};

// The template's class; none for a name that is not a template.
[[nodiscard]] std::optional<FaultClass> fault_class(const std::string& fault);
// The template names, for messages ("upstream_delay, ...").
[[nodiscard]] std::string fault_names();

inline constexpr int64_t kMaxProposalDurationS = 3600;

// A proposal that cannot be judged at all (no such template, a dependency
// fault without a target, a duration out of range): the field and why.
[[nodiscard]] std::optional<SpecError> check_proposal(const Proposal& p);

struct Refusal {
  std::string code;  // not_opted_in, outside_window, slo_unhealthy, no_redundancy,
                     // not_observed_dependency, stateful, one_at_a_time, kill_switch, fact_unreadable
  std::string message;
};

struct ValidationVerdict {
  std::vector<Refusal> refusals;  // empty: allowed
  [[nodiscard]] bool ok() const { return refusals.empty(); }
  [[nodiscard]] bool refused(const std::string& code) const;
  // {"ok": bool, "refusals": [{"code", "message"}]}
  [[nodiscard]] nlohmann::json to_json() const;
};

// The SLO limits the validator holds a service to.
inline constexpr double kMaxBurnRate1h = 1.0;       // refused at or above: the budget burns faster than it refills
inline constexpr double kMinBudgetRemaining = 0.5;  // refused below: half the 30-day budget spent

// Every refusal that applies, in the order above (a fact that cannot be read
// is a refusal, never a pass). The proposal must have passed check_proposal().
[[nodiscard]] ValidationVerdict validate(const Proposal& p, FactSource& facts, const Clock& clock);

}  // namespace faultline
