// ResourceRun: state first, then the reaper, then the journalled change.
#include "userspace/faults/resource/run.h"

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "base/clock.h"
#include "base/units.h"
#include "loader/netns.h"
#include "userspace/faults/resource/reaper.h"

namespace faultline {
namespace {

// The longest an apply may take before the reaper may revert a half-applied fault.
constexpr uint64_t kApplyBudgetNs = 120'000'000'000ULL;

}  // namespace

Result<std::unique_ptr<ResourceRun>> ResourceRun::plan(const ResourceSpec& spec) {
  auto planned = plan_resource_fault(spec);
  if (!planned) {
    // Plan errors describe the input against this system (no such pid, a
    // refused target, a floor); only a failure to read the system is not.
    const Error& e = planned.error();
    return e.err == EIO || e.err == ENOMEM ? e : as_bad_input(e);
  }
  return std::unique_ptr<ResourceRun>(new ResourceRun(spec, std::move(*planned)));
}

nlohmann::json ResourceRun::plan() const {
  nlohmann::json j = spec_.to_json();
  j["plan"] = fault_->plan();
  j["deadman"] = {{"reaper", "detached, own session"},
                  {"grace", format_duration(reaper_grace_ns())},
                  {"state", ResourceFaultStore::default_root()}};
  return j;
}

std::string ResourceRun::dry_run_text() const {
  std::ostringstream o;
  o << "dry run: would apply " << spec_.summary() << " for " << format_duration(spec_.duration_ns)
    << "\n  plan: " << fault_->plan().dump() << "\n  deadman: a detached reaper reverts it at expiry + "
    << format_duration(reaper_grace_ns()) << " whatever happens to faultctl\n";
  return o.str();
}

uint32_t ResourceRun::netns_inode() const {
  auto host = resolve_netns("");
  return host ? host->inode : 0;
}

Result<FaultStart> ResourceRun::apply() {
  auto store = ResourceFaultStore::open(true);
  if (!store) return make_error(store.error().err, store.error().message + " (set FAULTLINE_RUN_DIR, or run as root)");
  store_.emplace(std::move(*store));
  auto id = store_->allocate_id();
  if (!id) return id.error();

  // 1. The state, before anything else exists: whoever finds it can undo what follows.
  const uint64_t grace = reaper_grace_ns();
  ResourceFaultState& st = state_;
  st.id = *id;
  st.token = random_token();
  st.kind = resource_kind_name(spec_.kind);
  st.summary = spec_.summary();
  st.spec = spec_.to_json();
  st.plan = fault_->plan();
  st.boot_id = boot_id();
  if (auto self = read_process(::getpid())) st.owner = self->identity();
  st.expires_ns = boottime_ns() + spec_.duration_ns + kApplyBudgetNs;
  st.grace_ns = grace;
  st.created_wall = wall_seconds();
  st.record_dir = record_dir_;
  {
    auto lock = store_->lock(st.id);
    if (!lock) return lock.error();
    FL_TRY(store_->write(st));
  }
  // 2. The deadman, before the first change.
  auto reaper = spawn_reaper(*store_, st.id);
  if (!reaper) {
    (void)store_->remove(st.id);
    return make_error(reaper.error().err, "cannot start the reaper (" + reaper.error().message +
                                              "); refusing a fault that nothing would end");
  }
  // 3. The change, journalled ahead, under the lock so that no abort interleaves.
  Status applied = [&]() -> Status {
    auto lock = store_->lock(st.id);
    if (!lock) return lock.error();
    st.reaper = *reaper;
    FL_TRY(store_->write(st));
    UndoJournal journal(*store_, st);
    FL_TRY(fault_->apply(journal));
    st.phase = "active";
    st.expires_ns = boottime_ns() + spec_.duration_ns;
    st.plan = fault_->plan();
    return store_->write(st);
  }();
  if (!applied) {
    auto r = revert_fault(*store_, st.id, "apply failed");
    fault_->release();
    ended_ = true;
    std::string what = "could not apply " + spec_.summary() + ": " + applied.error().describe();
    if (!r)
      what += "; the revert failed too (" + r.error().describe() + "), the reaper and the next faultctl retry it";
    else
      what += "; everything done so far was reverted";
    return make_error(0, what);
  }
  FaultStart s;
  s.id = st.id;
  s.expires_ns = st.expires_ns;
  s.event = spec_.to_json();
  s.event["plan"] = st.plan;
  s.event["reaper_pid"] = reaper->pid;
  s.event["grace"] = format_duration(grace);
  s.event["state"] = store_->state_path(st.id);
  s.text = "fault " + st.id + " applied: " + spec_.summary() + " for " + format_duration(spec_.duration_ns) +
           "\n  reaper pid " + std::to_string(reaper->pid) + " reverts it by expiry + " + format_duration(grace) +
           " even if faultctl dies; faultctl abort " + st.id + " ends it now";
  return s;
}

std::optional<FaultEnding> ResourceRun::check() {
  struct stat sb {};
  if (::stat(store_->state_path(state_.id).c_str(), &sb) != 0)
    return FaultEnding{RunOutcome::AbortedFromOutside, "ended from outside (faultctl abort)", std::nullopt};
  if (auto c = fault_->check(); !c) return FaultEnding{RunOutcome::Failed, c.error().describe(), std::nullopt};
  return std::nullopt;
}

FaultObservation ResourceRun::observe() {
  nlohmann::json seen = fault_->observe();
  return {{{"observed", seen}}, seen.value("text", "")};
}

Status ResourceRun::end(std::string_view reason) {
  if (ended_) return {};
  ended_ = true;
  auto reverted = revert_fault(*store_, state_.id, std::string(reason));
  fault_->release();
  if (!reverted)
    return make_error(reverted.error().err,
                      "reverting fault " + state_.id + " failed: " + reverted.error().message +
                          "; the reaper and the next faultctl retry it (faultctl status shows it)");
  return {};
}

void ResourceRun::describe_end(bool ended, FaultObservation& obs) const {
  obs.fields["reverted"] = ended;
  obs.text += ended ? "; reverted" : "; NOT reverted";
}

}  // namespace faultline
