// PacketRun: the packet family's side of the guarded run.
#include "userspace/faults/packet/run.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <iomanip>
#include <sstream>

#include "base/clock.h"
#include "base/units.h"

namespace faultline {
namespace {

std::string pct(uint64_t part, uint64_t whole) {
  if (whole == 0) return "0%";
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << 100.0 * static_cast<double>(part) / static_cast<double>(whole) << "%";
  return o.str();
}

nlohmann::json counters(const fl_fault_stats& s) {
  return {{"matched", s.matched},       {"dropped", s.dropped}, {"corrupted", s.corrupted},
          {"duplicated", s.duplicated}, {"delayed", s.delayed}, {"bytes", s.bytes}};
}

std::string counters_text(FaultKind kind, const fl_fault_stats& s) {
  std::ostringstream o;
  o << "matched " << s.matched;
  switch (kind) {
    case FaultKind::Corrupt:
      o << " corrupted " << s.corrupted;
      break;
    case FaultKind::Duplicate:
      o << " duplicated " << s.duplicated;
      break;
    case FaultKind::Latency:
    case FaultKind::Bandwidth:
      o << " delayed " << s.delayed;
      break;
    default:
      o << " dropped " << s.dropped << " (" << pct(s.dropped, s.matched) << ")";
  }
  return o.str();
}

}  // namespace

Result<std::unique_ptr<PacketRun>> PacketRun::plan(const FaultSpec& spec, AttachMode attach) {
  NetfaultEngine engine;
  auto p = engine.plan(spec, attach);
  if (!p) return p.error();
  return std::unique_ptr<PacketRun>(new PacketRun(std::move(*p)));
}

std::string PacketRun::dry_run_text() const {
  std::ostringstream o;
  o << "dry run: would apply " << plan_.spec.summary() << " for " << format_duration(plan_.spec.duration_ns)
    << "\n  mechanism: " << plan_.mechanism << "\n  devices:";
  for (const auto& d : plan_.devices) o << " " << d.name;
  o << " (" << plan_.device_choice << ")";
  for (const auto& r : routes_json(plan_.routes, plan_.devices))
    o << "\n    " << r["target"].get<std::string>() << " -> " << r["dev"].get<std::string>() << " ("
      << r["type"].get<std::string>() << " route)";
  if (plan_.routes.size() > 8) o << "\n    ... " << plan_.routes.size() - 8 << " more targets";
  o << "\n  fault: " << plan_.spec.to_json().dump() << "\n";
  return o.str();
}

Result<FaultStart> PacketRun::apply() {
  auto applied = engine_.apply(plan_, static_cast<uint32_t>(::getpid()));
  if (!applied) {
    // The one input error only the kernel's state can reveal: the same fault is on already.
    if (applied.error().err == EEXIST) return as_bad_input(applied.error());
    return applied.error();
  }
  applied_ = *applied;
  auto maps = NetfaultMaps::open(engine_.layout(), false);
  if (!maps) {
    (void)engine_.end(applied_->slot);
    return maps.error();
  }
  maps_.emplace(std::move(*maps));
  table_.emplace(*maps_);
  FaultStart s;
  s.id = std::to_string(applied_->slot);
  s.expires_ns = applied_->expires_ns;
  s.event = plan_.to_json();
  s.event["attach"] = applied_->attach_mode;
  std::ostringstream t;
  t << "fault " << s.id << " applied: " << plan_.spec.summary() << " for " << format_duration(plan_.spec.duration_ns)
    << " via " << applied_->attach_mode << " on";
  for (const auto& d : plan_.devices) t << " " << d.name;
  s.text = t.str();
  return s;
}

std::optional<FaultEnding> PacketRun::check() {
  fl_fault f{};
  const uint32_t slot = applied_->slot;
  if (!table_->exists(slot) || bpf_map_lookup_elem(maps_->faults(), &slot, &f) != 0 || f.expires_ns == 0)
    return FaultEnding{RunOutcome::AbortedFromOutside, "ended from outside (faultctl abort)", std::nullopt};
  return std::nullopt;
}

fl_fault_stats PacketRun::stats() const {
  if (final_stats_) return *final_stats_;
  auto s = table_->stats(applied_->slot);
  return s ? *s : fl_fault_stats{};
}

fl_budget PacketRun::budget() const {
  if (final_budget_) return *final_budget_;
  return table_->budget(applied_->slot);
}

FaultObservation PacketRun::observe() {
  fl_fault_stats st = stats();
  FaultObservation o{{{"counters", counters(st)}}, counters_text(plan_.spec.kind, st)};
  const uint64_t now = boottime_ns();
  fl_budget b = budget();
  if (b.max) {
    o.fields["cap"] = cap_json(b, now);
    o.text += " | " + cap_text(b, now);
  }
  if (b.start_ns > now)
    o.text += " | starts in " + format_duration((b.start_ns - now) / 1'000'000'000ULL * 1'000'000'000ULL);
  return o;
}

Status PacketRun::end(std::string_view reason) {
  if (final_stats_) return {};
  final_stats_ = stats();
  final_budget_ = budget();
  // On a breach the entry is deactivated first: one map write, and every
  // program passes the fault's traffic from that instant.
  if (reason == "guardrail") (void)table_->deactivate(applied_->slot);
  auto st = engine_.end(applied_->slot);
  if (!st)
    return make_error(st.error().err, "the fault ended in the kernel, but cleaning up failed: " + st.error().message);
  return {};
}

std::optional<std::string> PacketRun::touched_nothing() const {
  // The counters as the entry left them; a fault that never applied has none.
  if (!final_stats_ || final_stats_->matched != 0) return std::nullopt;
  std::string where;
  for (const auto& d : plan_.devices) where += (where.empty() ? "" : ", ") + d.name;
  const char* dir = plan_.spec.dir_mask == (FL_DIR_EGRESS | FL_DIR_INGRESS) ? "both directions"
                    : plan_.spec.dir_mask == FL_DIR_EGRESS                  ? "egress"
                                                                            : "ingress";
  return "the fault matched no packet while it was on (" + std::string(dir) + " on " + where +
         "): nothing was tested; check --target, --port, --proto and --direction against the traffic";
}

}  // namespace faultline
