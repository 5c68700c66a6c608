// Toxic JSON in Toxiproxy's shape and its validation, one table of attributes per type.
#include "userspace/proxy/toxic.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace faultline {
namespace {

using json = nlohmann::json;

struct AttributeField {
  const char* json_name;
  int64_t* value;
};

// The JSON name of each attribute of a toxic type, over the member that holds it.
std::vector<AttributeField> fields_of(LatencyToxic& t) {
  return {{"latency", &t.latency_ms}, {"jitter", &t.jitter_ms}};
}
std::vector<AttributeField> fields_of(BandwidthToxic& t) { return {{"rate", &t.rate_kbps}}; }
std::vector<AttributeField> fields_of(SlowCloseToxic& t) { return {{"delay", &t.delay_ms}}; }
std::vector<AttributeField> fields_of(TimeoutToxic& t) { return {{"timeout", &t.timeout_ms}}; }
std::vector<AttributeField> fields_of(ResetPeerToxic& t) { return {{"timeout", &t.timeout_ms}}; }
std::vector<AttributeField> fields_of(SlicerToxic& t) {
  return {{"average_size", &t.average_size}, {"size_variation", &t.size_variation}, {"delay", &t.delay_us}};
}
std::vector<AttributeField> fields_of(LimitDataToxic& t) { return {{"bytes", &t.bytes}}; }
std::vector<AttributeField> fields_of(NoopToxic&) { return {}; }

std::vector<AttributeField> fields_of(ToxicAttributes& a) {
  return std::visit([](auto& t) { return fields_of(t); }, a);
}

constexpr std::array<std::pair<std::string_view, ToxicAttributes (*)()>, 8> kTypes{{
    {"latency", [] { return ToxicAttributes{LatencyToxic{}}; }},
    {"bandwidth", [] { return ToxicAttributes{BandwidthToxic{}}; }},
    {"slow_close", [] { return ToxicAttributes{SlowCloseToxic{}}; }},
    {"timeout", [] { return ToxicAttributes{TimeoutToxic{}}; }},
    {"reset_peer", [] { return ToxicAttributes{ResetPeerToxic{}}; }},
    {"slicer", [] { return ToxicAttributes{SlicerToxic{}}; }},
    {"limit_data", [] { return ToxicAttributes{LimitDataToxic{}}; }},
    {"noop", [] { return ToxicAttributes{NoopToxic{}}; }},
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
  const auto& s = v.get_ref<const std::string&>();
  if (s == "upstream") return Stream::upstream;
  if (s == "downstream") return Stream::downstream;
  return field_error("stream", "unknown stream \"" + s + "\" (upstream or downstream)");
}

// Applies the members of `attrs` (an object) to `t`'s attributes; unknown names and
// non-integers are errors.
Status apply_attributes(Toxic& t, const json& attrs) {
  if (attrs.is_null()) return {};
  if (!attrs.is_object()) return field_error("attributes", "must be an object");
  auto fields = fields_of(t.attributes);
  for (const auto& [key, value] : attrs.items()) {
    AttributeField* field = nullptr;
    for (auto& f : fields)
      if (key == f.json_name) field = &f;
    if (field == nullptr)
      return field_error("attributes." + key, "not an attribute of a " + std::string(t.type()) + " toxic");
    if (!value.is_number_integer()) return field_error("attributes." + key, "must be an integer, got " + value.dump());
    if (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(INT64_MAX))
      return field_error("attributes." + key, "out of range: " + value.dump());
    *field->value = value.get<int64_t>();
  }
  return {};
}

// Applies the top-level fields of `body` except "type" and "attributes".
Status apply_common(Toxic& t, const json& body) {
  for (const auto& [key, value] : body.items()) {
    if (key == "type" || key == "attributes") continue;
    if (key == "name") {
      if (!value.is_string()) return field_error("name", "must be a string");
      t.name = value.get<std::string>();
    } else if (key == "stream") {
      auto s = parse_stream(value);
      if (!s) return s.error();
      t.stream = *s;
    } else if (key == "toxicity") {
      if (!value.is_number()) return field_error("toxicity", "must be a number in [0, 1], got " + value.dump());
      t.toxicity = value.get<double>();
    } else {
      return field_error(key, "unknown field (name, type, stream, toxicity, attributes)");
    }
  }
  return {};
}

}  // namespace

std::string_view stream_name(Stream s) { return s == Stream::upstream ? "upstream" : "downstream"; }

std::string_view Toxic::type() const { return kTypes[attributes.index()].first; }

Status validate_toxic(const Toxic& t) {
  if (t.name.empty()) return field_error("name", "must not be empty");
  if (!std::isfinite(t.toxicity) || t.toxicity < 0.0 || t.toxicity > 1.0)
    return field_error("toxicity", "out of [0, 1]: " + std::to_string(t.toxicity));
  Toxic copy = t;
  for (const auto& f : fields_of(copy.attributes))
    if (*f.value < 0)
      return field_error("attributes." + std::string(f.json_name),
                         "must not be negative, got " + std::to_string(*f.value));
  if (const auto* s = std::get_if<SlicerToxic>(&t.attributes)) {
    if (s->average_size <= 0) return field_error("attributes.average_size", "must be at least 1 byte");
    if (s->size_variation >= s->average_size)
      return field_error("attributes.size_variation", "must be smaller than average_size");
  }
  return {};
}

json toxic_to_json(const Toxic& t) {
  json attrs = json::object();
  Toxic copy = t;
  for (const auto& f : fields_of(copy.attributes)) attrs[f.json_name] = *f.value;
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
  if (auto type = patch.find("type"); type != patch.end() && (!type->is_string() || *type != current.type()))
    return field_error(
        "type", "cannot change the type of toxic \"" + current.name + "\" (" + std::string(current.type()) + ")");
  Toxic t = current;
  FL_TRY(apply_common(t, patch));
  if (auto a = patch.find("attributes"); a != patch.end()) FL_TRY(apply_attributes(t, *a));
  FL_TRY(validate_toxic(t));
  return t;
}

}  // namespace faultline
