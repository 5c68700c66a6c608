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

constexpr const char* kResourceFields[] = {"pid",   "name", "cgroup", "action", "signal", "force",
                                           "cores", "load", "size",   "path",   "fill",   "min_free"};

constexpr FlagField kResourceFlagFields[] = {
    {"duration", "duration_sec"},
    {"pid", "pid"},
    {"name", "name"},
    {"cgroup", "cgroup"},
    {"action", "action"},
    {"signal", "signal"},
    {"force", "force"},
    {"cores", "cores"},
    {"load", "load"},
    {"size", "size"},
    {"path", "path"},
    {"fill", "fill"},
    {"min-free", "min_free"},
};

Result<uint64_t> resource_size_field(const nlohmann::json& spec, const char* f) {
  auto text = spec_string(spec, f);
  if (!text) return text.error();
  auto b = parse_size_bytes(*text);
  if (!b) return spec_field_error(f, b.error().message);
  return *b;
}

}  // namespace

std::span<const char* const> resource_spec_fields() { return kResourceFields; }
std::span<const FlagField> resource_flag_fields() { return kResourceFlagFields; }

Result<ResourceSpec> resource_spec_from_json(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("kind") || !spec["kind"].is_string())
    return spec_field_error("kind", "is required: process, cpu, memory or disk");
  const auto kind = resource_kind_from_name(spec["kind"].get<std::string>());
  if (!kind) return spec_field_error("kind", "not a resource fault kind (process, cpu, memory, disk)");
  ResourceSpec s;
  s.kind = *kind;
  for (const auto& [flag, f] : kResourceFlagFields)
    if (spec.contains(f) && std::string(flag) != "duration" && !resource_kind_takes(s.kind, flag))
      return spec_field_error(f, std::string("does not apply to a ") + resource_kind_name(s.kind) + " fault");
  auto d = spec_duration_ns(spec, ResourceCaps::kMinDurationNs, ResourceCaps::kMaxDurationNs);
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
      auto l = spec_number(spec, "load");
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
    auto f = spec_number(spec, "fill");
    if (!f) return f.error();
    s.fill_percent = *f;
  }
  if (auto v = validate(s); !v) return spec_error_from_flags(v.error(), kResourceFlagFields, "kind");
  return s;
}

}  // namespace faultline
