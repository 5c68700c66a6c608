// status / abort / uninstall for the sessions of userspace/state/session_registry.h.
#include "userspace/ops/session_state.h"

#include <algorithm>
#include <iomanip>
#include <optional>
#include <ostream>

#include "base/clock.h"
#include "base/exit_code.h"
#include "base/process.h"
#include "userspace/state/session_registry.h"

namespace faultline {
namespace {

std::string left_text(const Session& s, uint64_t now) {
  if (s.expires_ns == 0) return "-";
  if (s.expires_ns <= now) return "ended";
  return std::to_string((s.expires_ns - now) / 1'000'000'000ULL) + "s";
}

std::string counters_text(const nlohmann::json& c) {
  std::string out;
  for (const auto& [k, v] : c.items()) out += (out.empty() ? "" : " ") + k + "=" + v.dump();
  return out.empty() ? "-" : out;
}

}  // namespace

nlohmann::json session_status_json() {
  nlohmann::json out = {{"syscall_faults", nlohmann::json::array()},
                        {"tcp_faults", nlohmann::json::array()},
                        {"guards", nlohmann::json::array()}};
  auto reg = SessionRegistry::open(false);
  if (!reg) return out;
  const uint64_t now = boottime_ns();
  for (const auto& s : reg->list()) {
    nlohmann::json j = {{"id", s.id},
                        {"mechanism", s.mechanism},
                        {"summary", s.summary},
                        {"owner_pid", s.owner.pid},
                        {"counters", session_counters(s)}};
    if (s.kind == "guard") j["orphaned"] = s.orphaned;
    if (!s.pin_dir.empty()) j["pin_dir"] = s.pin_dir;  // a guard's pinned links (and redirected_conns)
    if (s.expires_ns != 0) {
      j["active"] = s.expires_ns > now;
      j["left_s"] = s.expires_ns > now ? (s.expires_ns - now) / 1'000'000'000ULL : 0;
    }
    out[s.kind == "guard" ? "guards" : s.kind == "tcp" ? "tcp_faults" : "syscall_faults"].push_back(j);
  }
  return out;
}

bool print_session_status(std::ostream& out) {
  auto reg = SessionRegistry::open(false);
  if (!reg) return false;
  auto sessions = reg->list();
  if (sessions.empty()) return false;
  const uint64_t now = boottime_ns();
  std::vector<std::string> counters;
  size_t width = 10;
  for (const auto& s : sessions) {
    counters.push_back(counters_text(session_counters(s)));
    width = std::max(width, counters.back().size() + 2);
  }
  out << std::left << std::setw(6) << "ID" << std::setw(9) << "KIND" << std::setw(7) << "LEFT" << std::setw(9)
      << "OWNER" << std::setw(static_cast<int>(width)) << "COUNTERS"
      << "WHAT\n";
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Session& s = sessions[i];
    out << std::setw(6) << s.id << std::setw(9) << s.kind << std::setw(7) << left_text(s, now) << std::setw(9)
        << s.owner.pid << std::setw(static_cast<int>(width)) << counters[i] << s.summary << "\n";
    const nlohmann::json c = session_counters(s);
    if (c.contains("cap") && c.value("failed", uint64_t{0}) >= c["cap"].get<uint64_t>())
      out << "      cap reached: " << c["cap"].dump() << " injections (" << c.value("cap_spared", uint64_t{0})
          << " spared)\n";
    if (s.orphaned)
      out << "      orphaned: its faultctl is gone and its pinned hooks still enforce on cgroup " << s.cgroup
          << " until the cgroup is empty (faultctl abort " << s.id << " releases them)\n";
  }
  return true;
}

int abort_session_command(const std::string& id, std::ostream& out, std::ostream& err) {
  auto reg = SessionRegistry::open(false);
  std::optional<Session> s;
  if (reg) {
    if (auto r = reg->read(id)) s = std::move(*r);
  }
  if (!s) {
    err << "faultctl abort: no active " << (id[0] == 'g' ? "guard " : "fault ") << id << "\n";
    return kExitBadInput;
  }
  auto r = abort_session(*reg, id);
  if (!r) {
    err << "faultctl abort: " << id << ": " << r.error().describe() << "\n";
    return kExitFailure;
  }
  if (!r->was_running) {
    out << id << " had already ended (its faultctl, pid " << s->owner.pid << ", is gone)\n";
    return kExitCompleted;
  }
  if (!r->owner_confirmed) {
    err << "faultctl abort: " << id << (r->disarmed_in_kernel ? " is disarmed in the kernel, but its" : ": its")
        << " faultctl (pid " << s->owner.pid << ") did not confirm within 3 s\n";
    return kExitFailure;
  }
  if (s->kind == "guard")
    out << "guard " << id << " released" << (is_alive(s->owner) ? "" : " (its faultctl was gone)")
        << ": its command runs on unguarded (" << s->summary << ")\n";
  else
    out << "fault " << id << " ended (" << s->summary << ")\n";
  return kExitCompleted;
}

Result<int> abort_all_session_faults(std::ostream& out) {
  auto reg = SessionRegistry::open(false);
  if (!reg) return 0;
  int n = 0;
  std::optional<Error> first;
  for (const auto& s : reg->list()) {
    if (s.kind != "syscall" && s.kind != "tcp") continue;
    auto r = abort_session(*reg, s.id);
    if (!r) {
      if (!first) first = make_error(r.error().err, s.id + ": " + r.error().describe());
      continue;
    }
    if (r->was_running && !r->owner_confirmed && !first)
      first = make_error(ETIMEDOUT, s.id + ": its faultctl (pid " + std::to_string(s.owner.pid) + ") did not confirm");
    if (r->was_running) {
      ++n;
      out << "fault " << s.id << " ended (" << s.summary << ")\n";
    }
  }
  if (first) return *first;
  return n;
}

std::vector<std::string> live_guard_lines() {
  std::vector<std::string> out;
  auto reg = SessionRegistry::open(false);
  if (!reg) return out;
  for (const auto& s : reg->list()) {
    if (s.kind == "guard") out.push_back(s.id + ": " + s.summary);
  }
  return out;
}

}  // namespace faultline
