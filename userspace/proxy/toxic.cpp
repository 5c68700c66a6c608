// Toxic JSON in Toxiproxy's shape and its validation, one table of attributes per type.
#include "userspace/proxy/toxic.h"

#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace faultline {
namespace {

using json = nlohmann::json;

// kToxiproxy: Toxiproxy's own attribute, shown always and never judged.
// kJudged: an extension's attribute (of limit_time, slow_open), shown always,
// refused when negative. kOptIn: first_n, shown only when set (so a Toxiproxy
// client sees Toxiproxy's shape), refused when negative.
enum class FieldKind : uint8_t { kToxiproxy, kJudged, kOptIn };

struct AttributeField {
  const char* json_name;
  int64_t* value;
  FieldKind kind = FieldKind::kToxiproxy;
};

AttributeField first_n_field(int64_t& v) { return {"first_n", &v, FieldKind::kOptIn}; }

// The JSON name of each attribute of a toxic type, over the member that holds it.
std::vector<AttributeField> fields_of(LatencyToxic& t) {
  return {{"latency", &t.latency_ms}, {"jitter", &t.jitter_ms}, first_n_field(t.first_n)};
}
std::vector<AttributeField> fields_of(BandwidthToxic& t) { return {{"rate", &t.rate_kbps}, first_n_field(t.first_n)}; }
std::vector<AttributeField> fields_of(SlowCloseToxic& t) { return {{"delay", &t.delay_ms}, first_n_field(t.first_n)}; }
std::vector<AttributeField> fields_of(TimeoutToxic& t) {
  return {{"timeout", &t.timeout_ms}, first_n_field(t.first_n)};
}
std::vector<AttributeField> fields_of(ResetPeerToxic& t) {
  return {{"timeout", &t.timeout_ms}, first_n_field(t.first_n)};
}
std::vector<AttributeField> fields_of(SlicerToxic& t) {
  return {{"average_size", &t.average_size},
          {"size_variation", &t.size_variation},
          {"delay", &t.delay_us},
          first_n_field(t.first_n)};
}
std::vector<AttributeField> fields_of(LimitDataToxic& t) { return {{"bytes", &t.bytes}, first_n_field(t.first_n)}; }
std::vector<AttributeField> fields_of(NoopToxic&) { return {}; }
std::vector<AttributeField> fields_of(LimitTimeToxic& t) {
  return {{"time", &t.time_ms, FieldKind::kJudged}, first_n_field(t.first_n)};
}
std::vector<AttributeField> fields_of(SlowOpenToxic& t) {
  return {{"delay", &t.delay_ms, FieldKind::kJudged}, first_n_field(t.first_n)};
}

std::vector<AttributeField> fields_of(ToxicAttributes& a) {
  return std::visit([](auto& t) { return fields_of(t); }, a);
}

constexpr std::array<std::pair<std::string_view, ToxicAttributes (*)()>, 10> kTypes{{
    {"latency", [] { return ToxicAttributes{LatencyToxic{}}; }},
    {"bandwidth", [] { return ToxicAttributes{BandwidthToxic{}}; }},
    {"slow_close", [] { return ToxicAttributes{SlowCloseToxic{}}; }},
    {"timeout", [] { return ToxicAttributes{TimeoutToxic{}}; }},
    {"reset_peer", [] { return ToxicAttributes{ResetPeerToxic{}}; }},
    {"slicer", [] { return ToxicAttributes{SlicerToxic{}}; }},
    {"limit_data", [] { return ToxicAttributes{LimitDataToxic{}}; }},
    {"noop", [] { return ToxicAttributes{NoopToxic{}}; }},
    {"limit_time", [] { return ToxicAttributes{LimitTimeToxic{}}; }},
    {"slow_open", [] { return ToxicAttributes{SlowOpenToxic{}}; }},
}};

Error field_error(const std::string& field, const std::string& what) {
  return input_error(EINVAL, "toxic: \"" + field + "\": " + what);
}

std::string type_list() {
  std::string s;
  for (const auto& [name, make] : kTypes) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

Result<Stream> parse_stream(const json& v) {
  if (!v.is_string()) return field_error("stream", "must be a string (upstream or downstream)");
  std::string s = v.get<std::string>();
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (s == "upstream") return Stream::upstream;
  if (s == "downstream") return Stream::downstream;
  return field_error("stream", "unknown stream \"" + v.get<std::string>() + "\" (upstream or downstream)");
}

// Applies the members of `attrs` (an object) to `t`'s attributes as Toxiproxy's
// decoder does: a member the type does not have is ignored, null leaves the
// value, anything but an int64 is an error.
Status apply_attributes(Toxic& t, const json& attrs) {
  if (attrs.is_null()) return {};
  if (!attrs.is_object()) return field_error("attributes", "must be an object");
  auto fields = fields_of(t.attributes);
  for (const auto& [key, value] : attrs.items()) {
    AttributeField* field = nullptr;
    for (auto& f : fields)
      if (key == f.json_name) field = &f;
    if (field == nullptr || value.is_null()) continue;
    if (!value.is_number_integer()) return field_error("attributes." + key, "must be an integer, got " + value.dump());
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
      return field_error("attributes." + key, "out of range: " + value.dump());
    *field->value = value.get<int64_t>();
  }
  return {};
}

// Applies the top-level fields of `body` except "type" and "attributes". As
// Toxiproxy: null leaves a field as it is, an unknown field is ignored, the
// stream's case is free.
Status apply_common(Toxic& t, const json& body) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;
    if (key == "name") {
      if (!value.is_string()) return field_error("name", "must be a string");
      t.name = value.get<std::string>();
    } else if (key == "stream") {
      auto s = parse_stream(value);
      if (!s) return s.error();
      t.stream = *s;
    } else if (key == "toxicity") {
      if (!value.is_number()) return field_error("toxicity", "must be a number, got " + value.dump());
      t.toxicity = value.get<double>();
    }
  }
  return {};
}

}  // namespace

std::string_view stream_name(Stream s) { return s == Stream::upstream ? "upstream" : "downstream"; }

std::string_view Toxic::type() const { return kTypes[attributes.index()].first; }

int64_t first_n_of(const ToxicAttributes& a) {
  ToxicAttributes copy = a;
  for (const auto& f : fields_of(copy))
    if (f.kind == FieldKind::kOptIn) return *f.value;
  return 0;
}

// Toxiproxy judges no attribute value: a negative one acts as 0 there (and in
// plan_direction here), a slicer of any sizes is run (split_slice keeps it
// safe where Toxiproxy's recursion would panic), a toxicity past 1 always
// applies and one below 0 never does. Only what cannot be a toxic is refused.
Status validate_toxic(const Toxic& t) {
  if (t.name.empty()) return field_error("name", "must not be empty");
  if (!std::isfinite(t.toxicity)) return field_error("toxicity", "must be a finite number");
  // The extensions are Faultline's: their values are judged, where Toxiproxy's
  // attributes are taken as its decoder takes them.
  Toxic copy = t;
  for (const auto& f : fields_of(copy.attributes))
    if (f.kind != FieldKind::kToxiproxy && *f.value < 0)
      return field_error("attributes." + std::string(f.json_name),
                         "must not be negative, got " + std::to_string(*f.value));
  return {};
}

Status validate_toxic_strict(const Toxic& t) {
  FL_TRY(validate_toxic(t));
  if (t.toxicity < 0.0 || t.toxicity > 1.0)
    return field_error("toxicity", "out of [0, 1]: " + std::to_string(t.toxicity));
  Toxic copy = t;
  for (const auto& f : fields_of(copy.attributes))
    if (*f.value < 0)
      return field_error("attributes." + std::string(f.json_name),
                         "must not be negative, got " + std::to_string(*f.value));
  if (const auto* s = std::get_if<SlicerToxic>(&t.attributes)) {
    if (s->average_size <= 0) return field_error("attributes.average_size", "must be at least 1 byte");
  }
  return {};
}

json toxic_to_json(const Toxic& t) {
  json attrs = json::object();
  Toxic copy = t;
  for (const auto& f : fields_of(copy.attributes))
    if (f.kind != FieldKind::kOptIn || *f.value != 0) attrs[f.json_name] = *f.value;
  return json{{"name", t.name},
              {"type", std::string(t.type())},
              {"stream", std::string(stream_name(t.stream))},
              {"toxicity", t.toxicity},
              {"attributes", attrs}};
}

Result<Toxic> toxic_from_json(const json& body) {
  if (!body.is_object()) return input_error(EINVAL, "toxic: the body must be a JSON object");
  auto type = body.find("type");
  if (type == body.end()) return field_error("type", "missing (one of " + type_list() + ")");
  if (!type->is_string()) return field_error("type", "must be a string (one of " + type_list() + ")");
  Toxic t;
  const auto& name = type->get_ref<const std::string&>();
  bool known = false;
  for (const auto& [type_name, make] : kTypes)
    if (type_name == name) {
      t.attributes = make();
      known = true;
    }
  if (!known) return field_error("type", "unknown type \"" + name + "\" (one of " + type_list() + ")");
  FL_TRY(apply_common(t, body));
  if (auto a = body.find("attributes"); a != body.end()) FL_TRY(apply_attributes(t, *a));
  if (body.find("name") == body.end() || t.name.empty())
    t.name = std::string(t.type()) + "_" + std::string(stream_name(t.stream));
  FL_TRY(validate_toxic(t));
  return t;
}

Result<Toxic> toxic_merged(const Toxic& current, const json& patch) {
  if (!patch.is_object()) return input_error(EINVAL, "toxic: the body must be a JSON object");
  // Toxiproxy's update reads only these two; name, type and stream stay.
  Toxic t = current;
  if (auto v = patch.find("toxicity"); v != patch.end() && !v->is_null()) {
    if (!v->is_number()) return field_error("toxicity", "must be a number, got " + v->dump());
    t.toxicity = v->get<double>();
  }
  if (auto a = patch.find("attributes"); a != patch.end()) FL_TRY(apply_attributes(t, *a));
  FL_TRY(validate_toxic(t));
  return t;
}

}  // namespace faultline
