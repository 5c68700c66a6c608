// The resource side of the sweep, status, abort and uninstall: the state
// folder's records, read and reverted through the resource fault store.
#include "userspace/ops/resource_state.h"

#include <iomanip>
#include <optional>
#include <ostream>

#include "base/clock.h"
#include "base/exit_code.h"
#include "base/process.h"
#include "userspace/faults/resource/reaper.h"
#include "userspace/faults/resource/store.h"

namespace faultline {
namespace {

std::string left_text(const ResourceFaultState& st, uint64_t now) {
  if (st.expires_ns <= now) return "due";
  return std::to_string((st.expires_ns - now) / 1'000'000'000ULL) + "s";
}

}  // namespace

void sweep_resource_state(std::ostream& err) {
  auto store = ResourceFaultStore::open(false);
  if (!store) return;  // no state folder (nothing ever ran), or not ours to read
  for (const auto& note : sweep_resource_faults(*store)) err << "faultctl: " << note << "\n";
}

bool has_resource_faults() {
  auto store = ResourceFaultStore::open(false);
  return store && !store->list().empty();
}

nlohmann::json resource_status_json() {
  nlohmann::json out = nlohmann::json::array();
  auto store = ResourceFaultStore::open(false);
  if (!store) return out;
  const uint64_t now = boottime_ns();
  for (const auto& st : store->list()) {
    nlohmann::json j = st.spec;
    j["id"] = st.id;
    j["summary"] = st.summary;
    j["phase"] = st.phase;
    j["active"] = st.phase != "revert-failed" && st.expires_ns > now;
    j["left_s"] = st.expires_ns > now ? (st.expires_ns - now) / 1'000'000'000ULL : 0;
    j["plan"] = st.plan;
    j["owner_pid"] = st.owner.pid;
    j["owner_alive"] = is_alive(st.owner);
    j["reaper_pid"] = st.reaper.pid;
    j["reaper_alive"] = is_alive(st.reaper);
    j["reverts_by_s"] = st.expires_ns + st.grace_ns > now ? (st.expires_ns + st.grace_ns - now) / 1'000'000'000ULL : 0;
    if (!st.record_dir.empty()) j["record"] = st.record_dir;
    if (!st.error.empty()) j["error"] = st.error;
    out.push_back(j);
  }
  return out;
}

void print_resource_status(std::ostream& out) {
  auto store = ResourceFaultStore::open(false);
  if (!store) return;
  auto faults = store->list();
  if (faults.empty()) return;
  const uint64_t now = boottime_ns();
  out << std::left << std::setw(6) << "ID" << std::setw(9) << "KIND" << std::setw(7) << "LEFT" << std::setw(16)
      << "OWNER" << std::setw(16) << "REAPER"
      << "FAULT\n";
  for (const auto& st : faults) {
    std::string owner = std::to_string(st.owner.pid) + (is_alive(st.owner) ? "" : " (gone)");
    std::string reaper =
        st.reaper.pid == 0 ? "-" : std::to_string(st.reaper.pid) + (is_alive(st.reaper) ? "" : " (DEAD)");
    out << std::setw(6) << st.id << std::setw(9) << st.kind << std::setw(7) << left_text(st, now) << std::setw(16)
        << owner << std::setw(16) << reaper << st.summary << (st.phase == "active" ? "" : " [" + st.phase + "]")
        << "\n";
    if (!st.error.empty()) out << "      " << st.error << "\n";
  }
}

bool is_resource_fault_id(const std::string& id) {
  return id.size() >= 2 && id.size() <= 12 && id[0] == 'r' &&
         id.find_first_not_of("0123456789", 1) == std::string::npos;
}

int abort_resource_fault(const std::string& id, std::ostream& out, std::ostream& err) {
  auto store = ResourceFaultStore::open(false);
  if (!store) {
    err << "faultctl abort: no active fault " << id << "\n";
    return kExitBadInput;
  }
  auto st = store->read(id);
  if (!st) {
    err << "faultctl abort: no active fault " << id << "\n";
    return kExitBadInput;
  }
  auto r = revert_fault(*store, id, "faultctl abort");
  if (!r) {
    err << "faultctl abort: " << r.error().describe() << "\n";
    return kExitFailure;
  }
  out << "fault " << id << " ended and reverted (" << st->summary << ")\n";
  return kExitCompleted;
}

Result<int> abort_all_resource_faults() {
  auto store = ResourceFaultStore::open(false);
  if (!store) return 0;
  int n = 0;
  std::optional<Error> first;
  for (const auto& st : store->list()) {
    auto r = revert_fault(*store, st.id, "faultctl abort --all");
    if (!r && !first) first = r.error();
    if (r && *r) ++n;
  }
  if (first) return *first;
  return n;
}

}  // namespace faultline
