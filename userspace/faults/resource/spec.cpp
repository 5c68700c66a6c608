// ResourceSpec names, validation, sizes, signals and rendering.
#include "userspace/faults/resource/spec.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "base/units.h"

namespace faultline {
namespace {

struct ResourceKindName {
  ResourceKind kind;
  const char* name;
};
constexpr ResourceKindName kResourceKinds[] = {{ResourceKind::Process, "process"},
                                               {ResourceKind::Cpu, "cpu"},
                                               {ResourceKind::Memory, "memory"},
                                               {ResourceKind::Disk, "disk"}};

struct SignalName {
  int sig;
  const char* name;
};
// SIGSTOP and the terminal stops are left out on purpose: a stop is `--action freeze`,
// which resumes the process at the end; a bare stop signal would outlive the fault.
constexpr SignalName kSignals[] = {
    {SIGHUP, "HUP"},   {SIGINT, "INT"},   {SIGQUIT, "QUIT"}, {SIGILL, "ILL"},   {SIGTRAP, "TRAP"},
    {SIGABRT, "ABRT"}, {SIGBUS, "BUS"},   {SIGFPE, "FPE"},   {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},
    {SIGSEGV, "SEGV"}, {SIGUSR2, "USR2"}, {SIGPIPE, "PIPE"}, {SIGALRM, "ALRM"}, {SIGTERM, "TERM"},
};

std::string fmt(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

const char* resource_kind_name(ResourceKind k) {
  for (const auto& e : kResourceKinds) {
    if (e.kind == k) return e.name;
  }
  return "?";
}

std::optional<ResourceKind> resource_kind_from_name(const std::string& s) {
  for (const auto& e : kResourceKinds) {
    if (s == e.name) return e.kind;
  }
  return std::nullopt;
}

bool is_resource_kind(const std::string& s) { return resource_kind_from_name(s).has_value(); }

std::string format_bytes(uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream o;
  o.precision(v >= 100 || u == 0 || v == static_cast<double>(static_cast<uint64_t>(v)) ? 0 : 1);
  o << std::fixed << v << units[u];
  return o.str();
}

Result<int> parse_signal(const std::string& s) {
  std::string t = s;
  for (char& c : t) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (t.rfind("SIG", 0) == 0) t = t.substr(3);
  bool numeric = !t.empty() && t.find_first_not_of("0123456789") == std::string::npos && t.size() <= 3;
  for (const auto& e : kSignals) {
    if (t == e.name || (numeric && std::stoi(t) == e.sig)) return e.sig;
  }
  if (t == "STOP" || t == "TSTP" || t == "TTIN" || t == "TTOU" ||
      (numeric && (std::stoi(t) == SIGSTOP || std::stoi(t) == SIGTSTP)))
    return make_error(EINVAL, "'" + s + "' stops the process and would outlive the fault; use --action freeze");
  return make_error(
      EINVAL, "'" + s + "' is not a signal faultctl sends (TERM, KILL, INT, HUP, QUIT, ABRT, SEGV, USR1, USR2, ...)");
}

std::string signal_name(int sig) {
  for (const auto& e : kSignals) {
    if (e.sig == sig) return std::string("SIG") + e.name;
  }
  return "signal " + std::to_string(sig);
}

const std::vector<std::string>& resource_specific_flags() {
  static const std::vector<std::string> v = {"pid",   "name", "cgroup", "action", "signal", "force",
                                             "cores", "load", "size",   "path",   "fill",   "min-free"};
  return v;
}

bool resource_kind_takes(ResourceKind k, const std::string& f) {
  switch (k) {
    case ResourceKind::Process:
      return f == "pid" || f == "name" || f == "cgroup" || f == "action" || f == "signal" || f == "force";
    case ResourceKind::Cpu:
      return f == "cores" || f == "load" || f == "cgroup";
    case ResourceKind::Memory:
      return f == "size";
    case ResourceKind::Disk:
      return f == "path" || f == "fill" || f == "size" || f == "min-free";
  }
  return false;
}

Status validate(const ResourceSpec& s) {
  if (s.duration_ns == 0) return make_error(EINVAL, "--duration is required (at most 1h), e.g. --duration 30s");
  if (s.duration_ns > ResourceCaps::kMaxDurationNs)
    return make_error(ERANGE, "--duration " + format_duration(s.duration_ns) + " is over the cap of 1h");
  if (s.duration_ns < ResourceCaps::kMinDurationNs) return make_error(ERANGE, "--duration must be at least 1s");
  switch (s.kind) {
    case ResourceKind::Process: {
      int given = (s.pid ? 1 : 0) + (s.name.empty() ? 0 : 1) + (s.cgroup.empty() ? 0 : 1);
      if (given == 0) return make_error(EINVAL, "--pid, --name or --cgroup is required: which processes to hit");
      if (given > 1) return make_error(EINVAL, "--pid, --name and --cgroup exclude each other; give one");
      if (s.pid && *s.pid <= 0) return make_error(EINVAL, "--pid must be a positive process ID");
      if (s.pid && static_cast<uint64_t>(*s.pid) > ResourceCaps::kMaxPid)
        return make_error(ERANGE,
                          "--pid " + std::to_string(*s.pid) + ": at most " + std::to_string(ResourceCaps::kMaxPid));
      break;
    }
    case ResourceKind::Cpu:
      if (s.cores == 0) return make_error(EINVAL, "--cores must be at least 1");
      if (s.cores > ResourceCaps::kMaxCores)
        return make_error(
            ERANGE, "--cores " + std::to_string(s.cores) + ": at most " + std::to_string(ResourceCaps::kMaxCores));
      if (s.load <= 0 || s.load > 100) return make_error(ERANGE, "--load must be above 0 and at most 100 (percent)");
      break;
    case ResourceKind::Memory:
      if (s.size_bytes < (1ULL << 20)) return make_error(ERANGE, "--size must be at least 1MiB");
      break;
    case ResourceKind::Disk:
      if (s.path.empty()) return make_error(EINVAL, "--path is required: a directory on the file system to fill");
      if (s.fill_percent && s.size_bytes) return make_error(EINVAL, "--fill and --size exclude each other; give one");
      if (!s.fill_percent && !s.size_bytes) return make_error(EINVAL, "--fill PERCENT or --size SIZE is required");
      if (s.fill_percent && *s.fill_percent >= 100)
        return make_error(ERANGE,
                          "--fill " + fmt(*s.fill_percent) +
                              "% is refused: a full file system is an outage, not an experiment; at most 99.9%");
      if (s.fill_percent && *s.fill_percent <= 0) return make_error(ERANGE, "--fill must be above 0%");
      if (s.min_free_bytes < ResourceCaps::kMinMinFreeBytes)
        return make_error(ERANGE, "--min-free must be at least 1MiB");
      break;
  }
  return {};
}

nlohmann::json ResourceSpec::to_json() const {
  nlohmann::json j;
  j["kind"] = resource_kind_name(kind);
  switch (kind) {
    case ResourceKind::Process:
      if (pid) j["pid"] = *pid;
      if (!name.empty()) j["name"] = name;
      if (!cgroup.empty()) j["cgroup"] = cgroup;
      j["action"] = action == ProcessAction::Freeze ? "freeze" : "kill";
      if (action == ProcessAction::Kill) j["signal"] = signal_name(signal);
      if (force) j["force"] = true;
      break;
    case ResourceKind::Cpu:
      j["cores"] = cores;
      j["load"] = load;
      if (!cgroup.empty()) j["cgroup"] = cgroup;
      break;
    case ResourceKind::Memory:
      j["size"] = format_bytes(size_bytes);
      j["size_bytes"] = size_bytes;
      break;
    case ResourceKind::Disk:
      j["path"] = path;
      if (fill_percent) j["fill_percent"] = *fill_percent;
      if (size_bytes) {
        j["size"] = format_bytes(size_bytes);
        j["size_bytes"] = size_bytes;
      }
      j["min_free"] = format_bytes(min_free_bytes);
      break;
  }
  j["duration"] = format_duration(duration_ns);
  return j;
}

std::string ResourceSpec::summary() const {
  std::ostringstream o;
  switch (kind) {
    case ResourceKind::Process:
      o << "process " << (action == ProcessAction::Freeze ? "freeze" : "kill (" + signal_name(signal) + ")");
      if (pid) o << " pid " << *pid;
      if (!name.empty()) o << " name " << name;
      if (!cgroup.empty()) o << " cgroup " << cgroup;
      break;
    case ResourceKind::Cpu:
      o << "cpu " << cores << (cores == 1 ? " core" : " cores") << " at " << fmt(load) << "%";
      if (!cgroup.empty()) o << " in cgroup " << cgroup;
      break;
    case ResourceKind::Memory:
      o << "memory " << format_bytes(size_bytes);
      break;
    case ResourceKind::Disk:
      o << "disk " << path;
      if (fill_percent)
        o << " to " << fmt(*fill_percent) << "% full";
      else
        o << " +" << format_bytes(size_bytes);
      break;
  }
  return o.str();
}

}  // namespace faultline
