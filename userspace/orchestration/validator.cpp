// The validator's rules, each read from the facts at the time of the call.
#include "userspace/orchestration/validator.h"

#include <cstdio>

#include "userspace/orchestration/catalogue.h"

namespace faultline {
namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

}  // namespace

std::optional<FaultClass> fault_class(const std::string& fault) {
  const CatalogueTemplate* t = find_template(fault);
  if (!t) return std::nullopt;
  return t->cls;
}

std::string fault_names() {
  std::string s;
  for (const auto& t : catalogue()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

std::optional<SpecError> check_proposal(const Proposal& p) {
  if (!valid_service_name(p.service)) return SpecError{"service", "must be a service's name (1-63 of a-z 0-9 . _ -)"};
  auto cls = fault_class(p.fault);
  if (!cls) return SpecError{"fault", "\"" + p.fault + "\" is not a template: one of " + fault_names()};
  if (*cls == FaultClass::Dependency && p.target.empty())
    return SpecError{"target", p.fault + " needs the dependency it acts on (\"host:port\")"};
  if (*cls != FaultClass::Dependency && !p.target.empty())
    return SpecError{"target", p.fault + " acts on one instance faultcp draws: no target is given"};
  if (p.target.size() > 300) return SpecError{"target", "too long"};
  if (p.duration_s < 1 || p.duration_s > kMaxProposalDurationS)
    return SpecError{"duration_s", "must be 1-3600 seconds"};
  return std::nullopt;
}

bool ValidationVerdict::refused(const std::string& code) const {
  for (const auto& r : refusals)
    if (r.code == code) return true;
  return false;
}

nlohmann::json ValidationVerdict::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : refusals) list.push_back({{"code", r.code}, {"message", r.message}});
  return {{"ok", ok()}, {"refusals", list}};
}

ValidationVerdict validate(const Proposal& p, FactSource& facts, const Clock& clock) {
  ValidationVerdict v;
  auto refuse = [&](const char* code, std::string message) { v.refusals.push_back({code, std::move(message)}); };
  const FaultClass cls = fault_class(p.fault).value_or(FaultClass::Local);

  auto found = facts.service(p.service);
  if (!found) {
    refuse("fact_unreadable", "the service " + p.service + " could not be read: " + found.error().describe());
    return v;
  }
  if (!*found) {
    refuse("not_opted_in", "no service named " + p.service + " is registered, so none opted in");
    return v;
  }
  const ServiceFacts& s = **found;

  auto killed = facts.kill_switch_engaged(s);
  if (!killed)
    refuse("fact_unreadable", "the kill switch could not be read: " + killed.error().describe());
  else if (*killed)
    refuse("kill_switch",
           "a kill switch covering " + s.spec.name + " is engaged: nothing is started until it is released");

  if (!s.spec.chaos_enabled)
    refuse("not_opted_in", s.spec.name + " has not opted in to automated faults (its \"chaos\" is not \"enabled\")");

  const int64_t now = clock.now_unix_s();
  if (!s.spec.window.contains(now, now + p.duration_s))
    refuse("outside_window", "a run of " + std::to_string(p.duration_s) + " s starting now does not fit " +
                                 s.spec.name + "'s window, " + s.spec.window.describe());

  if (s.spec.stateful)
    refuse("stateful", s.spec.name + " is stateful: automation does not fault it (a person runs it by hand)");

  if (cls == FaultClass::Kill) {
    if (!s.spec.min_available)
      refuse("no_redundancy", "killing an instance of " + s.spec.name +
                                  " needs its min_available, and none is set: a finding, not a run");
    else if (s.replicas_ready < 2 || s.replicas_ready - 1 < *s.spec.min_available)
      refuse("no_redundancy", s.spec.name + " has " + std::to_string(s.replicas_ready) +
                                  " ready replica(s); a kill needs at least 2 and leaves min_available " +
                                  std::to_string(*s.spec.min_available) + ": a finding, not a run");
  }

  if (cls == FaultClass::Dependency) {
    bool seen = false;
    for (const auto& d : s.dependencies) seen = seen || d == p.target;
    if (!seen)
      refuse("not_observed_dependency",
             p.target + " is not a dependency " + s.spec.name + " was seen calling" +
                 (s.dependencies.empty() ? std::string(" (none observed yet)")
                                         : " (observed: " + std::to_string(s.dependencies.size()) + ")"));
  }

  auto running = facts.experiments_in_flight(s);
  if (!running)
    refuse("fact_unreadable", "the experiments in flight could not be read: " + running.error().describe());
  else if (*running > 0)
    refuse("one_at_a_time", std::to_string(*running) + " experiment(s) on " + s.spec.name +
                                "'s instances have not ended: one at a time");

  auto slo = facts.slo(s.spec);
  if (!slo) {
    refuse("fact_unreadable", "the SLO of " + s.spec.name + " could not be read: " + slo.error().describe());
  } else if (slo->burn_rate_1h >= kMaxBurnRate1h || slo->budget_remaining < kMinBudgetRemaining) {
    refuse("slo_unhealthy", s.spec.name + "'s SLO is unhealthy: burn rate over 1h " + num(slo->burn_rate_1h) +
                                " (refused at >= 1), error budget remaining " + num(slo->budget_remaining) +
                                " (refused below 0.5)");
  }
  return v;
}

}  // namespace faultline
