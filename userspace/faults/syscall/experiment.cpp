// "kind": "syscall" -> SyscallFaultSpec, checked with the CLI's validate().
#include "userspace/faults/syscall/experiment.h"

#include <climits>

#include "base/errno_names.h"
#include "base/seeded_random.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/faults/syscall/spec_check.h"

namespace faultline {
namespace {

using K = FieldKind;

// The fields of a syscall experiment, one row per `faultctl run syscall` flag it carries.
constexpr ExperimentField kSyscallFields[] = {
    {"syscall", "syscall", "", K::Text, "", {}, "syscall names, comma-separated (at most 64)"},
    {"errno", "errno", "", K::Text, "", {}, "errno name, e.g. EIO, ECONNREFUSED"},
    {"percent", "percent", "", K::Number, "%", FieldRange{0, 100}, "share of calls to fail (default 100)"},
    {"cgroup", "cgroup", "", K::Text, "", {}, "scope: an existing cgroup v2"},
    {"pid", "pid", "", K::Whole, "", FieldRange{2, SyscallCaps::kMaxPid}, "scope: one process"},
    {"via", "via", "", K::Text, "", {}, "force a mechanism: cgroup, lsm or seccomp (default: the best available)"},
    {"after", "after", "", K::Whole, "", FieldRange{1, SyscallCaps::kMaxInjections},
     "let the first N matching calls through untouched, then fail at --percent"},
    {"max_injections", "max-injections", "", K::Whole, "", FieldRange{1, SyscallCaps::kMaxInjections},
     "stop failing calls once N have failed"},
    {"start_after_ms",
     "start-after",
     "",
     K::Whole,
     "ms",
     {},
     "let every call through until this long after the fault is armed (less than --duration)"},
    {"include_loader",
     "include-loader",
     "",
     K::Switch,
     "",
     {},
     "seccomp, lsm: also fail the dynamic loader's library opens"},
    {"duration_sec", "duration", "", K::Whole, "s", FieldRange{1, SyscallCaps::kMaxDurationNs * 1e-9},
     "how long (required)"},
};

}  // namespace

std::span<const ExperimentField> syscall_experiment_fields() { return kSyscallFields; }
std::span<const FlagField> syscall_flag_fields() {
  static const std::vector<FlagField> table = flag_fields_of(kSyscallFields);
  return table;
}

Result<SyscallFaultSpec> syscall_spec_from_json(const nlohmann::json& spec) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  SyscallFaultSpec s;
  if (!spec.contains("syscall"))
    return spec_field_error("syscall", "is required (e.g. \"connect\" or \"openat,read\")");
  auto names = spec_string(spec, "syscall");
  if (!names) return names.error();
  // Comma-separated, as --syscall takes them.
  for (size_t at = 0;;) {
    const size_t comma = names->find(',', at);
    s.syscalls.push_back(names->substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (s.syscalls.size() > 64) return spec_field_error("syscall", "at most 64 names");
  if (!spec.contains("errno")) return spec_field_error("errno", "is required (e.g. \"EIO\")");
  auto err_name = spec_string(spec, "errno");
  if (!err_name) return err_name.error();
  auto e = errno_from_name(*err_name);
  if (!e) return spec_field_error("errno", *err_name + ": not a known errno name (EIO, EACCES, ECONNREFUSED, ...)");
  s.err = *e;
  if (spec.contains("percent")) {
    auto p = spec_percent(spec, "percent");
    if (!p) return p.error();
    s.percent = *p;
  }
  auto d = spec_duration_ns(spec);
  if (!d) return d.error();
  s.duration_ns = *d;
  FL_TRY(spec_optional_path(spec, "cgroup", s.cgroup));
  if (spec.contains("pid")) {
    auto p = spec_uint(spec, "pid", 1, INT_MAX);  // validate() names the cap of a pid
    if (!p) return p.error();
    s.pid = static_cast<int>(*p);
  }
  if (spec.contains("via")) {
    auto v = spec_string(spec, "via");
    if (!v) return v.error();
    if (*v == "seccomp")
      return spec_field_error("via",
                              "seccomp serves a command faultctl starts and wraps; an experiment names a cgroup "
                              "or pid (cgroup or lsm)");
    s.via = *v;
  }
  if (spec.contains("after")) {
    auto n = spec_count(spec, "after", 1, SyscallCaps::kMaxInjections);
    if (!n) return n.error();
    s.after = *n;
  }
  if (spec.contains("max_injections")) {
    auto n = spec_count(spec, "max_injections", 1, SyscallCaps::kMaxInjections);
    if (!n) return n.error();
    s.max_injections = *n;
  }
  if (spec.contains("start_after_ms")) {
    auto n = spec_uint(spec, "start_after_ms", 0, SyscallCaps::kMaxDurationNs / 1'000'000ULL);
    if (!n) return n.error();
    if (*n == 0) return spec_field_error("start_after_ms", "must be above 0 (leave it out to start at once)");
    s.start_after_ns = *n * 1'000'000ULL;
  }
  if (spec.contains("include_loader")) {
    auto b = spec_bool(spec, "include_loader");
    if (!b) return b.error();
    s.include_loader = *b;
  }
  if (s.cgroup.empty() == (s.pid == 0))
    return spec_field_error(s.cgroup.empty() ? "cgroup" : "pid", "give exactly one scope: cgroup or pid");
  if (auto v = validate(s); !v) return spec_error_from_flags(v.error(), syscall_flag_fields(), "syscall");
  s.seed = draw_seed();
  s.seed_drawn = true;
  return s;
}

}  // namespace faultline
