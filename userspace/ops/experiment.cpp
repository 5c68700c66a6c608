// The typed experiment: each family's reader, then the shared guardrails.
#include "userspace/ops/experiment.h"

#include "userspace/faults/experiment_guardrails.h"
#include "userspace/faults/packet/experiment.h"
#include "userspace/faults/resource/experiment.h"
#include "userspace/faults/spec_fields.h"
#include "userspace/faults/stream/experiment.h"
#include "userspace/faults/syscall/experiment.h"

namespace faultline {
namespace {

// A family reader that lists its own fields refuses the rest, the shared ones
// excepted: those are read by guardrails_from_json().
Status known_fields(const nlohmann::json& spec, std::span<const ExperimentField> family, const std::string& kind) {
  for (const auto& item : spec.items()) {
    const std::string& key = item.key();
    if (key == "kind" || is_guardrail_field(key)) continue;
    if (find_field(family, key) == nullptr) return spec_field_error(key, "not a field of a " + kind + " experiment");
  }
  return {};
}

// "spec.percent: must be within 0-100" -> "spec.percent (--percent): must be
// within 0-100": the error names the flag that spells the field, when a table
// lists it (an element "spec.target[1]" is its field's).
Error with_flag_named(const Error& e, std::span<const FlagField> family) {
  const std::string named = spec_error_field(e);
  if (named.empty() || e.message.compare(0, named.size() + 2, named + ": ") != 0) return e;
  std::string field = named.substr(5);
  if (const auto bracket = field.find('['); bracket != std::string::npos) field.resize(bracket);
  std::string flag;
  for (const auto& f : family)
    if (field == f.field) flag = f.flag;
  if (const ExperimentField* g = find_field_or_alias(guardrail_fields(), field); g != nullptr) flag = g->flag;
  if (flag.empty() || flag == "kind") return e;
  Error out = e;
  out.message = named + " (--" + flag + ")" + e.message.substr(named.size());
  return out;
}

// The flag of each field of a family (the packet table's, or the family's own).
std::span<const FlagField> family_flags(const std::string& family) {
  static const std::vector<FlagField> packet = flag_fields_of(packet_experiment_fields());
  if (family == "syscall") return syscall_flag_fields();
  if (family == "tcp") return tcp_flag_fields();
  if (family == "http") return http_flag_fields();
  if (family == "resource") return resource_flag_fields();
  return packet;
}

Result<Experiment> read_experiment(const nlohmann::json& spec, const std::string& record_dir);

}  // namespace

std::optional<std::string> experiment_family(const std::string& kind) {
  if (kind == "syscall" || kind == "tcp" || kind == "http") return kind;
  if (is_resource_kind(kind)) return std::string("resource");
  if (kind_from_name(kind)) return std::string("packet");
  return std::nullopt;
}

Result<Experiment> experiment_from_json(const nlohmann::json& spec, const std::string& record_dir) {
  auto e = read_experiment(spec, record_dir);
  if (e) return e;
  const std::string family = spec.is_object() && spec.contains("kind") && spec["kind"].is_string()
                                 ? experiment_family(spec["kind"].get<std::string>()).value_or("packet")
                                 : "packet";
  return with_flag_named(e.error(), family_flags(family));
}

namespace {

Result<Experiment> read_experiment(const nlohmann::json& spec, const std::string& record_dir) {
  if (!spec.is_object()) return input_error(EINVAL, "spec: not a JSON object");
  if (!spec.contains("kind")) return spec_field_error("kind", "is required");
  auto kind = spec_string(spec, "kind");
  if (!kind) return kind.error();
  Experiment e;
  std::string netns;  // where the health probe and the kernel signal look: the fault's namespace
  const auto family = experiment_family(*kind).value_or("packet");  // the packet reader names the kinds
  if (family == "syscall") {
    FL_TRY(known_fields(spec, syscall_experiment_fields(), *kind));
    auto s = syscall_spec_from_json(spec);
    if (!s) return s.error();
    e.fault = std::move(*s);
  } else if (family == "tcp") {
    FL_TRY(known_fields(spec, tcp_experiment_fields(), *kind));
    auto s = tcp_spec_from_json(spec);
    if (!s) return s.error();
    e.fault = std::move(*s);
  } else if (family == "http") {
    FL_TRY(known_fields(spec, http_experiment_fields(), *kind));
    auto s = http_spec_from_json(spec);
    if (!s) return s.error();
    e.fault = std::move(*s);
  } else if (family == "resource") {
    FL_TRY(known_fields(spec, resource_experiment_fields(), *kind));
    auto s = resource_spec_from_json(spec);
    if (!s) return s.error();
    e.fault = std::move(*s);
  } else {
    auto s = packet_spec_from_json(spec);
    if (!s) return s.error();
    netns = s->netns;
    e.fault = std::move(*s);
  }
  auto g = guardrails_from_json(spec, netns, record_dir);
  if (!g) return g.error();
  e.guardrails = std::move(g->guardrails);
  e.record = std::move(g->record);
  return e;
}

}  // namespace

Status add_experiment_guardrails(const GuardrailOptions& g, const std::optional<RecordOptions>& record,
                                 nlohmann::json& spec) {
  return guardrails_to_json(g, record, spec);
}

}  // namespace faultline
