#include "cp/proto/agent_wire.h"

#include <cctype>
#include <cstdint>
#include <optional>
#include <vector>

#include "cp/proto/agent.pb.h"

namespace faultline::cp::wire {
namespace {

// The wire types of protobuf's encoding.
enum Wire : uint32_t { Varint = 0, Fixed64 = 1, Len = 2, Fixed32 = 5 };

const char* wire_name(uint32_t w) {
  switch (w) {
    case Varint:
      return "0 (varint)";
    case Fixed64:
      return "1 (64-bit)";
    case Len:
      return "2 (length-delimited)";
    case 3:
      return "3 (group start)";
    case 4:
      return "4 (group end)";
    case Fixed32:
      return "5 (32-bit)";
    default:
      return "an invalid wire type";
  }
}

struct FieldSpec {
  uint32_t number;
  const char* name;
  uint32_t wire;
  bool repeated_scalar = false;  // also packed (length-delimited)
  const std::vector<FieldSpec>* nested = nullptr;
};

const std::vector<FieldSpec> kLabelEntry = {{1, "key", Len}, {2, "value", Len}};
const std::vector<FieldSpec> kRegister = {{1, "hostname", Len},
                                          {2, "kernel", Len},
                                          {3, "instance_id", Len},
                                          {4, "device", Len},
                                          {5, "version", Len},
                                          {6, "features_json", Len},
                                          {7, "labels", Len, false, &kLabelEntry}};
const std::vector<FieldSpec> kRegisterReply = {{1, "agent_id", Varint}, {2, "token", Len}};
const std::vector<FieldSpec> kExperiment = {
    {1, "id", Varint}, {2, "spec_json", Len}, {3, "lease_until_ms", Varint}, {4, "status", Len}};
const std::vector<FieldSpec> kAgentPolicy = {{1, "version", Varint}, {2, "selected", Varint}, {3, "text", Len}};
const std::vector<FieldSpec> kNextReply = {{1, "experiment", Len, false, &kExperiment},
                                           {2, "stop", Varint, true},
                                           {3, "kill", Varint},
                                           {4, "policy", Len, false, &kAgentPolicy}};
const std::vector<FieldSpec> kPolicyStatus = {
    {1, "version", Varint}, {2, "status", Len}, {3, "running_version", Varint}, {4, "detail", Len}};
const std::vector<FieldSpec> kEvent = {
    {1, "experiment_id", Varint}, {2, "type", Len}, {3, "detail", Len}, {4, "record_json", Len}};
const std::vector<FieldSpec> kEventReply = {{1, "experiment_id", Varint}, {2, "status", Len}, {3, "detail", Len}};

std::optional<uint64_t> read_varint(std::string_view b, size_t& at) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (at >= b.size()) return std::nullopt;
    const auto byte = static_cast<uint8_t>(b[at++]);
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  return std::nullopt;  // over 10 bytes
}

// Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF),
// as proto3 requires of a string field.
bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<uint8_t>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n + 1;
  }
  return true;
}

// Walks the fields before the parser does, to name what is wrong: the parser
// only says no (and keeps a field of the wrong wire type as an unknown one).
std::optional<WireError> scan(std::string_view b, const std::vector<FieldSpec>& fields, const std::string& prefix,
                              size_t base, int depth = 0) {
  size_t at = 0;
  while (at < b.size()) {
    const size_t start = at;
    auto tag = read_varint(b, at);
    if (!tag || *tag > 0xffffffffULL)
      return WireError{prefix.empty() ? "body" : prefix.substr(0, prefix.size() - 1),
                       "truncated or malformed field tag at byte " + std::to_string(base + start)};
    const auto number = static_cast<uint32_t>(*tag >> 3);
    const auto wire = static_cast<uint32_t>(*tag & 7);
    const FieldSpec* f = nullptr;
    for (const auto& s : fields)
      if (s.number == number) f = &s;
    if (f == nullptr)
      return WireError{prefix.empty() ? "body" : prefix.substr(0, prefix.size() - 1),
                       "unknown field number " + std::to_string(number) + " at byte " + std::to_string(base + start)};
    const std::string name = prefix + f->name;
    if (wire != f->wire && !(f->repeated_scalar && wire == Len))
      return WireError{name, "has wire type " + std::string(wire_name(wire)) + ", expected " + wire_name(f->wire)};
    const std::string cut = "is truncated at byte " + std::to_string(base + start);
    switch (wire) {
      case Varint:
        if (!read_varint(b, at)) return WireError{name, cut};
        break;
      case Fixed64:
      case Fixed32: {
        const size_t n = wire == Fixed64 ? 8 : 4;
        if (b.size() - at < n) return WireError{name, cut};
        at += n;
        break;
      }
      case Len: {
        auto len = read_varint(b, at);
        if (!len || *len > b.size() - at) return WireError{name, cut};
        const std::string_view inner = b.substr(at, *len);
        if (f->nested != nullptr) {
          if (depth > 4) return WireError{name, "is nested too deep"};
          if (auto e = scan(inner, *f->nested, name + ".", base + at, depth + 1)) return e;
        } else if (f->repeated_scalar) {
          size_t in = 0;
          while (in < inner.size())
            if (!read_varint(inner, in)) return WireError{name, "has a truncated packed value"};
        } else if (!is_utf8(inner)) {
          return WireError{name, "is not valid UTF-8"};
        }
        at += *len;
        break;
      }
      default:
        return WireError{name, "has wire type " + std::string(wire_name(wire)) + ", expected " + wire_name(f->wire)};
    }
  }
  return std::nullopt;
}

template <typename Message>
std::variant<Message, WireError> parse(std::string_view b, const std::vector<FieldSpec>& fields) {
  if (auto e = scan(b, fields, "", 0)) return *e;
  Message m;
  if (!m.ParseFromArray(b.data(), static_cast<int>(b.size())))
    return WireError{"body", "not a " + m.GetTypeName() + " message (a string field that is not UTF-8?)"};
  return m;
}

// A *_json member: a JSON object, or why not.
std::variant<nlohmann::json, WireError> json_object(const std::string& text, const std::string& field) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return WireError{field, "must be the text of a JSON object"};
  return j;
}

void put(nlohmann::json& j, const char* key, const std::string& v) {
  if (!v.empty()) j[key] = v;
}

std::string str(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}
int64_t num(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0;
}
// An object member as JSON text; nullopt when absent or not an object.
std::optional<std::string> obj_text(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_object()) return std::nullopt;
  return j[key].dump();
}

}  // namespace

Decoded decode_register(std::string_view bytes) {
  auto p = parse<RegisterRequest>(bytes, kRegister);
  if (auto* e = std::get_if<WireError>(&p)) return *e;
  const auto& m = std::get<RegisterRequest>(p);
  nlohmann::json j = nlohmann::json::object();
  put(j, "hostname", m.hostname());
  put(j, "kernel", m.kernel());
  put(j, "instance_id", m.instance_id());
  put(j, "device", m.device());
  put(j, "version", m.version());
  if (!m.features_json().empty()) {
    auto f = json_object(m.features_json(), "features_json");
    if (auto* e = std::get_if<WireError>(&f)) return *e;
    j["features"] = std::get<nlohmann::json>(f);
  }
  if (!m.labels().empty()) {
    j["labels"] = nlohmann::json::object();
    for (const auto& [k, v] : m.labels()) j["labels"][k] = v;
  }
  return j;
}

Decoded decode_register_reply(std::string_view bytes) {
  auto p = parse<RegisterReply>(bytes, kRegisterReply);
  if (auto* e = std::get_if<WireError>(&p)) return *e;
  const auto& m = std::get<RegisterReply>(p);
  return nlohmann::json{{"agent_id", m.agent_id()}, {"token", m.token()}};
}

Decoded decode_next_reply(std::string_view bytes) {
  auto p = parse<NextReply>(bytes, kNextReply);
  if (auto* e = std::get_if<WireError>(&p)) return *e;
  const auto& m = std::get<NextReply>(p);
  nlohmann::json j{{"experiment", nullptr}, {"stop", nlohmann::json::array()}, {"kill", m.kill()}};
  for (int64_t id : m.stop()) j["stop"].push_back(id);
  if (m.has_experiment()) {
    const auto& x = m.experiment();
    auto spec = json_object(x.spec_json(), "experiment.spec_json");
    if (auto* e = std::get_if<WireError>(&spec)) return *e;
    nlohmann::json e{{"id", x.id()}, {"spec", std::get<nlohmann::json>(spec)}, {"status", x.status()}};
    e["lease_until_ms"] = x.has_lease_until_ms() ? nlohmann::json(x.lease_until_ms()) : nlohmann::json(nullptr);
    j["experiment"] = std::move(e);
  }
  if (m.has_policy())
    j["policy"] = {{"version", m.policy().version()}, {"selected", m.policy().selected()}, {"text", m.policy().text()}};
  return j;
}

Decoded decode_policy_report(std::string_view bytes) {
  auto p = parse<PolicyStatus>(bytes, kPolicyStatus);
  if (auto* e = std::get_if<WireError>(&p)) return *e;
  const auto& m = std::get<PolicyStatus>(p);
  nlohmann::json j = nlohmann::json::object();
  if (m.version() != 0) j["version"] = m.version();
  put(j, "status", m.status());
  put(j, "detail", m.detail());
  if (m.has_running_version()) j["running_version"] = m.running_version();
  return j;
}

std::string encode_policy_report(const nlohmann::json& j) {
  PolicyStatus m;
  m.set_version(num(j, "version"));
  m.set_status(str(j, "status"));
  m.set_detail(str(j, "detail"));
  if (j.is_object() && j.contains("running_version") && j["running_version"].is_number_integer())
    m.set_running_version(j["running_version"].get<int64_t>());
  return m.SerializeAsString();
}

Decoded decode_event(std::string_view bytes) {
  auto p = parse<Event>(bytes, kEvent);
  if (auto* e = std::get_if<WireError>(&p)) return *e;
  const auto& m = std::get<Event>(p);
  nlohmann::json j = nlohmann::json::object();
  if (m.experiment_id() != 0) j["experiment_id"] = m.experiment_id();
  put(j, "type", m.type());
  put(j, "detail", m.detail());
  if (m.has_record_json()) {
    auto r = json_object(m.record_json(), "record_json");
    if (auto* e = std::get_if<WireError>(&r)) return *e;
    j["record"] = std::get<nlohmann::json>(r);
  }
  return j;
}

Decoded decode_event_reply(std::string_view bytes) {
  auto p = parse<EventReply>(bytes, kEventReply);
  if (auto* e = std::get_if<WireError>(&p)) return *e;
  const auto& m = std::get<EventReply>(p);
  return nlohmann::json{{"id", m.experiment_id()}, {"status", m.status()}, {"detail", m.detail()}};
}

std::string encode_register(const nlohmann::json& j) {
  RegisterRequest m;
  m.set_hostname(str(j, "hostname"));
  m.set_kernel(str(j, "kernel"));
  m.set_instance_id(str(j, "instance_id"));
  m.set_device(str(j, "device"));
  m.set_version(str(j, "version"));
  if (auto f = obj_text(j, "features")) m.set_features_json(*f);
  if (j.is_object() && j.contains("labels") && j["labels"].is_object())
    for (const auto& [k, v] : j["labels"].items())
      if (v.is_string()) (*m.mutable_labels())[k] = v.get<std::string>();
  return m.SerializeAsString();
}

std::string encode_register_reply(const nlohmann::json& j) {
  RegisterReply m;
  m.set_agent_id(num(j, "agent_id"));
  m.set_token(str(j, "token"));
  return m.SerializeAsString();
}

std::string encode_next_reply(const nlohmann::json& j) {
  NextReply m;
  m.set_kill(j.is_object() && j.contains("kill") && j["kill"].is_boolean() && j["kill"].get<bool>());
  if (j.is_object() && j.contains("stop") && j["stop"].is_array())
    for (const auto& s : j["stop"])
      if (s.is_number_integer()) m.add_stop(s.get<int64_t>());
  if (j.is_object() && j.contains("experiment") && j["experiment"].is_object()) {
    const auto& x = j["experiment"];
    auto* e = m.mutable_experiment();
    e->set_id(num(x, "id"));
    e->set_spec_json(obj_text(x, "spec").value_or("{}"));
    e->set_status(str(x, "status"));
    if (x.contains("lease_until_ms") && x["lease_until_ms"].is_number_integer())
      e->set_lease_until_ms(x["lease_until_ms"].get<int64_t>());
  }
  if (j.is_object() && j.contains("policy") && j["policy"].is_object()) {
    const auto& x = j["policy"];
    auto* pol = m.mutable_policy();
    pol->set_version(num(x, "version"));
    pol->set_selected(x.contains("selected") && x["selected"].is_boolean() && x["selected"].get<bool>());
    pol->set_text(str(x, "text"));
  }
  return m.SerializeAsString();
}

std::string encode_event(const nlohmann::json& j) {
  Event m;
  m.set_experiment_id(num(j, "experiment_id"));
  m.set_type(str(j, "type"));
  m.set_detail(str(j, "detail"));
  if (auto r = obj_text(j, "record")) m.set_record_json(*r);
  return m.SerializeAsString();
}

std::string encode_event_reply(const nlohmann::json& j) {
  EventReply m;
  m.set_experiment_id(num(j, "id"));
  m.set_status(str(j, "status"));
  m.set_detail(str(j, "detail"));
  return m.SerializeAsString();
}

bool is_protobuf_type(std::string_view content_type) {
  const auto semi = content_type.find(';');
  auto t = content_type.substr(0, semi);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  if (t.size() != kProtobufType.size()) return false;
  for (size_t i = 0; i < t.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(t[i])) != kProtobufType[i]) return false;
  return true;
}

bool accepts_protobuf(std::string_view accept) {
  size_t at = 0;
  while (at <= accept.size()) {
    const size_t comma = accept.find(',', at);
    const auto item = accept.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (is_protobuf_type(item)) return true;
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return false;
}

}  // namespace faultline::cp::wire
