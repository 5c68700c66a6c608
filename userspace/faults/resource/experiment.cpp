// "kind": "process" | "cpu" | "memory" | "disk" -> ResourceSpec, checked with
// the CLI's validate().
#include "userspace/faults/resource/experiment.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "base/units.h"
#include "userspace/faults/spec_fields.h"

namespace faultline {
namespace {

using K = FieldKind;

// The fields of a resource experiment, one row per `faultctl run
// process|cpu|memory|disk` flag it carries; which kind takes which is
// resource_kind_takes()'s.
constexpr ExperimentField kResourceFields[] = {
    {"pid", "pid", "", K::Whole, "", FieldRange{1, ResourceCaps::kMaxPid}, "process: one process ID"},
    {"name",
     "name",
     "",
     K::Text,
     "",
     {},
     "process: every process whose whole name (comm or argv[0]) matches this extended regex"},
    {"cgroup", "cgroup", "", K::Text, "", {}, "process: every process of this cgroup v2; cpu: where the workers run"},
    {"action", "action", "", K::Text, "", {}, "process: freeze (resumed at the end) or kill (one signal)"},
    {"signal", "signal", "", K::Text, "", {}, "process: the signal of action kill (default KILL)"},
    {"force",
     "force",
     "",
     K::Switch,
     "",
     {},
     "process: allow PID 1, the caller's ancestors, kernel threads and more than 64 matches"},
    {"cores", "cores", "", K::Whole, "", FieldRange{1, ResourceCaps::kMaxCores},
     "cpu: how many cores to burn, one pinned worker each"},
    {"load", "load", "", K::Number, "%", FieldRange{0, 100, true, false},
     "cpu: duty cycle of each worker in percent (default 100)"},
    {"size",
     "size",
     "",
     K::Text,
     "",
     {},
     "memory: memory to hold, at least 1MiB; disk: the balloon size: 512MiB, 2GB (MB = 10^6, MiB = 2^20)"},
    {"path", "path", "", K::Text, "", {}, "disk: a directory on the file system to fill"},
    {"fill", "fill", "", K::Number, "%", FieldRange{0, 100, true, true}, "disk: fill the file system to this use%"},
    {"min_free",
     "min-free",
     "",
     K::Text,
     "",
     {},
     "disk: never leave less free than this, at least 1MiB (default 256MiB)"},
    {"duration_sec", "duration", "", K::Whole, "s",
     FieldRange{ResourceCaps::kMinDurationNs * 1e-9, ResourceCaps::kMaxDurationNs * 1e-9}, "how long (required)"},
};

Result<uint64_t> resource_size_field(const nlohmann::json& spec, const char* f) {
  auto text = spec_string(spec, f);
  if (!text) return text.error();
  auto b = parse_size_bytes(*text);
  if (!b) return spec_field_error(f, b.error().message);
  return *b;
}

}  // namespace

std::span<const ExperimentField> resource_experiment_fields() { return kResourceFields; }
std::span<const FlagField> resource_flag_fields() {
  static const std::vector<FlagField> table = flag_fields_of(kResourceFields);
  return table;
}

Result<ResourceSpec> resource_spec_from_json(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("kind") || !spec["kind"].is_string())
    return spec_field_error("kind", "is required: process, cpu, memory or disk");
  const auto kind = resource_kind_from_name(spec["kind"].get<std::string>());
  if (!kind) return spec_field_error("kind", "not a resource fault kind (process, cpu, memory, disk)");
  ResourceSpec s;
  s.kind = *kind;
  for (const auto& f : kResourceFields)
    if (spec.contains(f.field) && std::string(f.flag) != "duration" && !resource_kind_takes(s.kind, f.flag))
      return spec_field_error(f.field, std::string("does not apply to a ") + resource_kind_name(s.kind) + " fault");
  auto d = spec_duration_ns(spec);
  if (!d) return d.error();
  s.duration_ns = *d;
  if (spec.contains("pid")) {
    auto p = spec_uint(spec, "pid", 0, INT32_MAX);  // validate() names the cap
    if (!p) return p.error();
    s.pid = static_cast<int>(*p);
  }
  FL_TRY(spec_optional_path(spec, "name", s.name));
  FL_TRY(spec_optional_path(spec, "cgroup", s.cgroup));
  FL_TRY(spec_optional_path(spec, "path", s.path));
  if (s.kind == ResourceKind::Process) {
    if (!spec.contains("action")) return spec_field_error("action", "is required for a process fault: freeze or kill");
    auto a = spec_string(spec, "action");
    if (!a) return a.error();
    if (*a == "freeze")
      s.action = ProcessAction::Freeze;
    else if (*a == "kill")
      s.action = ProcessAction::Kill;
    else
      return spec_field_error("action", "'" + *a + "': expected freeze or kill");
    if (spec.contains("signal")) {
      if (s.action != ProcessAction::Kill)
        return spec_field_error("signal", "goes with action kill; a freeze resumes with SIGCONT at the end");
      auto t = spec_string(spec, "signal");
      if (!t) return t.error();
      auto sig = parse_signal(*t);
      if (!sig) return spec_field_error("signal", sig.error().message);
      s.signal = *sig;
    }
    if (spec.contains("force")) {
      auto f = spec_bool(spec, "force");
      if (!f) return f.error();
      s.force = *f;
    }
  }
  if (s.kind == ResourceKind::Cpu) {
    if (!spec.contains("cores")) return spec_field_error("cores", "is required for a cpu fault");
    auto c = spec_uint(spec, "cores", 0, UINT32_MAX);  // validate() names the cap
    if (!c) return c.error();
    s.cores = static_cast<unsigned>(*c);
    if (spec.contains("load")) {
      auto l = spec_percent(spec, "load");
      if (!l) return l.error();
      s.load = *l;
    }
  }
  if (s.kind == ResourceKind::Memory && !spec.contains("size"))
    return spec_field_error("size", "is required for a memory fault, e.g. \"512MB\"");
  if (spec.contains("size")) {
    auto b = resource_size_field(spec, "size");
    if (!b) return b.error();
    s.size_bytes = *b;
  }
  if (spec.contains("min_free")) {
    auto b = resource_size_field(spec, "min_free");
    if (!b) return b.error();
    s.min_free_bytes = *b;
  }
  if (spec.contains("fill")) {
    auto f = spec_percent(spec, "fill");
    if (!f) return f.error();
    s.fill_percent = *f;
  }
  if (auto v = validate(s); !v) return spec_error_from_flags(v.error(), resource_flag_fields(), "kind");
  return s;
}

}  // namespace faultline
