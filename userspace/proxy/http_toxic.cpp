// HTTP toxics: each type is an HTTP fault type (or an LLM preset) under a
// Toxiproxy-style name; the body is translated into an HTTP fault's and read
// by http_fault_from_json, so both front ends judge values the same way.
#include "userspace/proxy/http_toxic.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <nlohmann/json.hpp>

namespace faultline {
namespace {

using json = nlohmann::json;

struct HttpToxicType {
  std::string_view name;
  HttpFaultType fault;
  LlmPreset preset;                            // llm only
  std::array<std::string_view, 5> attributes;  // the type's own, besides the matchers
};

constexpr std::array<HttpToxicType, 11> kHttpToxicTypes{{
    {"http_status", HttpFaultType::status, {}, {"status", "body", "content_type", "headers", "delay"}},
    {"http_delay", HttpFaultType::delay, {}, {"delay"}},
    {"http_reset", HttpFaultType::reset, {}, {}},
    {"http_truncate", HttpFaultType::truncate, {}, {"bytes"}},
    {"http_abort_stream", HttpFaultType::abort_stream, {}, {"events"}},
    {"llm_overloaded", HttpFaultType::llm, LlmPreset::overloaded, {"provider"}},
    {"llm_rate_limit", HttpFaultType::llm, LlmPreset::rate_limit, {"provider", "retry_after"}},
    {"llm_server_error", HttpFaultType::llm, LlmPreset::server_error, {"provider"}},
    {"llm_bad_gateway", HttpFaultType::llm, LlmPreset::bad_gateway, {"provider"}},
    {"llm_timeout", HttpFaultType::llm, LlmPreset::timeout, {"provider", "hang"}},
    {"llm_stream_cut", HttpFaultType::llm, LlmPreset::stream_cut, {"events"}},
}};

// Which requests, and how many: every HTTP toxic has these.
constexpr std::array<std::string_view, 6> kHttpToxicMatchAttributes{"host",          "method",  "path",
                                                                    "match_headers", "first_n", "attempts"};

const HttpToxicType* find_http_toxic_type(std::string_view name) {
  for (const auto& t : kHttpToxicTypes)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<std::string_view> http_toxic_attributes_of(const HttpToxicType& t) {
  std::vector<std::string_view> out;
  for (auto a : t.attributes)
    if (!a.empty()) out.push_back(a);
  out.insert(out.end(), kHttpToxicMatchAttributes.begin(), kHttpToxicMatchAttributes.end());
  return out;
}

Error http_toxic_field_error(const std::string& field, const std::string& what) {
  return input_error(EINVAL, "toxic: \"" + field + "\": " + what);
}

// http_fault_from_json names the fault's own fields; the toxic's are all
// attributes (match.path is attributes.path, first_n is attributes.first_n).
Error as_http_toxic_error(const Error& e) {
  static const std::pair<std::string_view, std::string_view> kRenames[] = {
      {"http fault: \"match.headers", "toxic: \"attributes.match_headers"},
      {"http fault: \"match.", "toxic: \"attributes."},
      {"http fault: \"first_n\"", "toxic: \"attributes.first_n\""},
      {"http fault: \"attempts\"", "toxic: \"attributes.attempts\""},
      {"http fault: ", "toxic: "},
  };
  Error out = e;
  for (const auto& [from, to] : kRenames) {
    if (out.message.rfind(from, 0) == 0) {
      out.message = std::string(to) + out.message.substr(from.size());
      break;
    }
  }
  return out;
}

Result<Stream> read_toxic_stream(const json& v) {
  if (!v.is_string()) return http_toxic_field_error("stream", "must be a string (upstream or downstream)");
  std::string s = v.get<std::string>();
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "upstream") return Stream::upstream;
  if (s == "downstream") return Stream::downstream;
  return http_toxic_field_error("stream", "unknown stream \"" + v.get<std::string>() + "\" (upstream or downstream)");
}

std::string http_toxic_type_list() {
  std::string s;
  for (const auto& t : kHttpToxicTypes) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

}  // namespace

bool is_http_toxic_type(std::string_view type) { return find_http_toxic_type(type) != nullptr; }

std::vector<std::string_view> http_toxic_types() {
  std::vector<std::string_view> out;
  for (const auto& t : kHttpToxicTypes) out.push_back(t.name);
  return out;
}

Result<HttpFault> http_toxic_from_json(const json& body) {
  if (!body.is_object()) return input_error(EINVAL, "toxic: the body must be a JSON object");
  auto tv = body.find("type");
  if (tv == body.end() || !tv->is_string())
    return http_toxic_field_error("type", "missing (one of " + http_toxic_type_list() + ")");
  const HttpToxicType* type = find_http_toxic_type(tv->get_ref<const std::string&>());
  if (type == nullptr)
    return http_toxic_field_error(
        "type", "unknown type \"" + tv->get<std::string>() + "\" (one of " + http_toxic_type_list() + ")");

  HttpToxicForm form{std::string(type->name), Stream::downstream, 1.0};
  std::string name;
  if (auto v = body.find("stream"); v != body.end() && !v->is_null()) {
    auto s = read_toxic_stream(*v);
    if (!s) return s.error();
    form.stream = *s;
  }
  if (auto v = body.find("toxicity"); v != body.end() && !v->is_null()) {
    if (!v->is_number()) return http_toxic_field_error("toxicity", "must be a number, got " + v->dump());
    form.toxicity = v->get<double>();
  }
  if (auto v = body.find("name"); v != body.end() && !v->is_null()) {
    if (!v->is_string()) return http_toxic_field_error("name", "must be a string");
    name = v->get<std::string>();
  }
  if (name.empty()) name = std::string(type->name) + "_" + std::string(stream_name(form.stream));

  // The HTTP fault this toxic is: its matchers and counts at the top, its
  // type's attributes under "attributes".
  json fault{{"name", name}, {"type", std::string(http_fault_type_name(type->fault))}};
  json match = json::object();
  json attrs = json::object();
  if (auto a = body.find("attributes"); a != body.end() && !a->is_null()) {
    if (!a->is_object()) return http_toxic_field_error("attributes", "must be an object");
    const auto allowed = http_toxic_attributes_of(*type);
    for (const auto& [key, v] : a->items()) {
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (auto n : allowed) list += (list.empty() ? "" : ", ") + std::string(n);
        return http_toxic_field_error("attributes." + key,
                                      "not an attribute of " + std::string(type->name) + " (" + list + ")");
      }
      if (v.is_null()) continue;
      if (key == "host" || key == "method" || key == "path") {
        match[key] = v;
      } else if (key == "match_headers") {
        match["headers"] = v;
      } else if (key == "first_n" || key == "attempts") {
        fault[key] = v;
      } else if (key == "provider" && v.is_string() && v.get_ref<const std::string&>().empty()) {
        continue;  // "": taken from the request, as when absent (what to_json shows)
      } else {
        attrs[key] = v;
      }
    }
  }
  if (type->fault == HttpFaultType::llm) attrs["preset"] = std::string(llm_preset_name(type->preset));
  // http_delay: the stream says what waits: the request (upstream) or the
  // response (downstream), as a latency toxic's stream does.
  if (type->fault == HttpFaultType::delay) attrs["where"] = form.stream == Stream::upstream ? "request" : "response";
  fault["match"] = match;
  fault["attributes"] = attrs;
  fault["percent"] = std::clamp(form.toxicity, 0.0, 1.0) * 100.0;
  auto f = http_fault_from_json(fault);
  if (!f) return as_http_toxic_error(f.error());
  f->toxic = std::move(form);
  return f;
}

json http_toxic_to_json(const HttpFault& f) {
  const HttpToxicForm form = f.toxic.value_or(HttpToxicForm{});
  const HttpToxicType* type = find_http_toxic_type(form.type);
  json a = json::object();
  if (type != nullptr) {
    for (auto key : type->attributes) {
      if (key == "status") a["status"] = f.status;
      if (key == "body") a["body"] = f.body;
      if (key == "content_type") a["content_type"] = f.content_type;
      if (key == "headers") {
        json hs = json::object();
        for (const auto& [k, v] : f.headers) hs[k] = v;
        a["headers"] = hs;
      }
      if (key == "delay" || key == "hang") a[std::string(key)] = f.delay_ms;
      if (key == "bytes") a["bytes"] = f.bytes;
      if (key == "events") a["events"] = f.events;
      if (key == "provider") a["provider"] = std::string(llm_provider_name(f.provider));
      if (key == "retry_after") a["retry_after"] = f.retry_after_s;
    }
  }
  a["host"] = f.match.host;
  a["method"] = f.match.method;
  a["path"] = f.match.path;
  json hs = json::array();
  for (const auto& h : f.match.headers)
    hs.push_back(h.has_equals ? json{{"name", h.name}, {"equals", h.equals}}
                              : json{{"name", h.name}, {"contains", h.contains}});
  a["match_headers"] = hs;
  a["first_n"] = f.first_n;
  a["attempts"] = f.attempts;
  return json{{"name", f.name},
              {"type", form.type},
              {"stream", std::string(stream_name(form.stream))},
              {"toxicity", form.toxicity},
              {"attributes", a}};
}

Result<HttpFault> http_toxic_merged(const HttpFault& current, const json& patch) {
  if (!patch.is_object()) return input_error(EINVAL, "toxic: the body must be a JSON object");
  json j = http_toxic_to_json(current);
  if (auto v = patch.find("toxicity"); v != patch.end() && !v->is_null()) {
    if (!v->is_number()) return http_toxic_field_error("toxicity", "must be a number, got " + v->dump());
    j["toxicity"] = *v;
  }
  if (auto a = patch.find("attributes"); a != patch.end() && !a->is_null()) {
    if (!a->is_object()) return http_toxic_field_error("attributes", "must be an object");
    for (const auto& [key, v] : a->items())
      if (!v.is_null()) j["attributes"][key] = v;
  }
  return http_toxic_from_json(j);
}

}  // namespace faultline
