// HTTP fault JSON and its validation: one table of attributes per type, every
// unknown member refused by name.
#include "userspace/proxy/http_fault.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <nlohmann/json.hpp>

namespace faultline {
namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<std::string_view, HttpFaultType>, 6> kHttpFaultTypes{{
    {"status", HttpFaultType::status},
    {"delay", HttpFaultType::delay},
    {"reset", HttpFaultType::reset},
    {"truncate", HttpFaultType::truncate},
    {"abort_stream", HttpFaultType::abort_stream},
    {"llm", HttpFaultType::llm},
}};

constexpr std::array<std::pair<std::string_view, LlmPreset>, 6> kLlmPresets{{
    {"overloaded", LlmPreset::overloaded},
    {"rate-limit", LlmPreset::rate_limit},
    {"server-error", LlmPreset::server_error},
    {"bad-gateway", LlmPreset::bad_gateway},
    {"timeout", LlmPreset::timeout},
    {"stream-cut", LlmPreset::stream_cut},
}};

// The attributes each type takes (JSON names).
std::vector<std::string_view> http_attributes_of(HttpFaultType t) {
  switch (t) {
    case HttpFaultType::status:
      return {"status", "body", "content_type", "headers", "delay"};
    case HttpFaultType::delay:
      return {"delay", "where"};
    case HttpFaultType::reset:
      return {};
    case HttpFaultType::truncate:
      return {"bytes"};
    case HttpFaultType::abort_stream:
      return {"events"};
    case HttpFaultType::llm:
      return {"preset", "provider", "retry_after", "hang", "events"};
  }
  return {};
}

Error fault_field_error(const std::string& field, const std::string& what) {
  return input_error(EINVAL, "http fault: \"" + field + "\": " + what);
}

template <typename Table>
std::string table_names(const Table& table) {
  std::string s;
  for (const auto& [name, value] : table) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

Result<std::string> json_string_field(const json& v, const std::string& field) {
  if (!v.is_string()) return fault_field_error(field, std::string("must be a string, got ") + v.type_name());
  return v.get<std::string>();
}

Result<int64_t> json_int_field(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  int64_t n = 0;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::floor(d) != d) return fault_field_error(field, "must be a whole number, got " + v.dump());
    n = int64_t(d);
  } else {
    return fault_field_error(field, std::string("must be a number, got ") + v.type_name());
  }
  if (n < lo || n > hi)
    return fault_field_error(
        field, "must be " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(n));
  return n;
}

bool is_http_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) return false;
  }
  return true;
}

bool is_header_value(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status read_http_match(const json& j, HttpMatch& m) {
  if (!j.is_object()) return fault_field_error("match", std::string("must be an object, got ") + j.type_name());
  for (const auto& [key, v] : j.items()) {
    if (key == "host" || key == "method" || key == "path") {
      auto s = json_string_field(v, "match." + key);
      if (!s) return s.error();
      (key == "host" ? m.host : key == "method" ? m.method : m.path) = *s;
    } else if (key == "headers") {
      if (!v.is_array())
        return fault_field_error("match.headers", "must be an array of {\"name\", \"equals\"|\"contains\"}");
      for (size_t i = 0; i < v.size(); ++i) {
        const std::string where = "match.headers[" + std::to_string(i) + "]";
        const json& h = v[i];
        if (!h.is_object()) return fault_field_error(where, "must be an object");
        HeaderMatch hm;
        bool has_name = false;
        bool has_contains = false;
        for (const auto& [hk, hv] : h.items()) {
          auto s = json_string_field(hv, where + "." + hk);
          if (!s) return s.error();
          if (hk == "name") {
            hm.name = lower_ascii(*s);
            has_name = true;
          } else if (hk == "equals") {
            hm.equals = *s;
            hm.has_equals = true;
          } else if (hk == "contains") {
            hm.contains = *s;
            has_contains = true;
          } else {
            return fault_field_error(where + "." + hk, "unknown field (name, equals, contains)");
          }
        }
        if (!has_name || !is_http_token(hm.name))
          return fault_field_error(where + ".name", "missing or not a header name");
        if (hm.has_equals == has_contains)
          return fault_field_error(where, "needs exactly one of \"equals\" and \"contains\"");
        m.headers.push_back(std::move(hm));
      }
    } else {
      return fault_field_error("match." + key, "unknown field (host, method, path, headers)");
    }
  }
  if (!m.method.empty() && !is_http_token(m.method))
    return fault_field_error("match.method", "not an HTTP method: " + m.method);
  if (!m.path.empty() && m.path[0] != '/' && m.path[0] != '*')
    return fault_field_error("match.path", "must start with / (a prefix or a glob), got \"" + m.path + "\"");
  return {};
}

Status read_http_attributes(const json& j, HttpFault& f) {
  if (!j.is_object()) return fault_field_error("attributes", std::string("must be an object, got ") + j.type_name());
  const auto allowed = http_attributes_of(f.type);
  bool has_preset = false;
  for (const auto& [key, v] : j.items()) {
    const std::string field = "attributes." + key;
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return fault_field_error(field, "not an attribute of " + std::string(http_fault_type_name(f.type)) +
                                          (list.empty() ? " (it has none)" : " (" + list + ")"));
    }
    if (key == "status") {
      auto n = json_int_field(v, field, 100, 599);
      if (!n) return n.error();
      f.status = *n;
    } else if (key == "body" || key == "content_type") {
      auto s = json_string_field(v, field);
      if (!s) return s.error();
      if (key == "content_type" && !is_header_value(*s)) return fault_field_error(field, "has a line break");
      (key == "body" ? f.body : f.content_type) = *s;
    } else if (key == "headers") {
      if (!v.is_object()) return fault_field_error(field, "must be an object of header names to string values");
      for (const auto& [hk, hv] : v.items()) {
        auto s = json_string_field(hv, field + "." + hk);
        if (!s) return s.error();
        if (!is_http_token(hk)) return fault_field_error(field + "." + hk, "not a header name");
        std::string lk = lower_ascii(hk);
        if (lk == "content-length" || lk == "transfer-encoding" || lk == "connection")
          return fault_field_error(field + "." + hk, "is set by the proxy");
        if (!is_header_value(*s)) return fault_field_error(field + "." + hk, "has a line break");
        f.headers.emplace_back(hk, *s);
      }
    } else if (key == "delay" || key == "hang") {
      auto n = json_int_field(v, field, 0, 3'600'000);
      if (!n) return n.error();
      f.delay_ms = *n;
    } else if (key == "where") {
      auto s = json_string_field(v, field);
      if (!s) return s.error();
      if (*s == "request")
        f.where = DelayPoint::request;
      else if (*s == "response")
        f.where = DelayPoint::response;
      else
        return fault_field_error(field, "must be \"request\" or \"response\", got \"" + *s + "\"");
    } else if (key == "bytes") {
      auto n = json_int_field(v, field, 0, int64_t(1) << 40);
      if (!n) return n.error();
      f.bytes = *n;
    } else if (key == "events") {
      auto n = json_int_field(v, field, 0, 1'000'000);
      if (!n) return n.error();
      f.events = *n;
    } else if (key == "retry_after") {
      auto n = json_int_field(v, field, 0, 86400);
      if (!n) return n.error();
      f.retry_after_s = *n;
    } else if (key == "preset") {
      auto s = json_string_field(v, field);
      if (!s) return s.error();
      auto it = std::find_if(kLlmPresets.begin(), kLlmPresets.end(), [&](const auto& p) { return p.first == *s; });
      if (it == kLlmPresets.end())
        return fault_field_error(field, "unknown preset \"" + *s + "\" (" + table_names(kLlmPresets) + ")");
      f.preset = it->second;
      has_preset = true;
    } else if (key == "provider") {
      auto s = json_string_field(v, field);
      if (!s) return s.error();
      if (*s == "anthropic")
        f.provider = LlmProvider::anthropic;
      else if (*s == "openai")
        f.provider = LlmProvider::openai;
      else
        return fault_field_error(field, "unknown provider \"" + *s + "\" (anthropic, openai; omitted: from the host)");
    }
  }
  if (f.type == HttpFaultType::llm && !has_preset)
    return fault_field_error("attributes.preset", "missing (" + table_names(kLlmPresets) + ")");
  return {};
}

}  // namespace

std::string_view http_fault_type_name(HttpFaultType t) {
  for (const auto& [name, value] : kHttpFaultTypes)
    if (value == t) return name;
  return "?";
}

std::string_view llm_preset_name(LlmPreset p) {
  for (const auto& [name, value] : kLlmPresets)
    if (value == p) return name;
  return "?";
}

std::string_view llm_provider_name(LlmProvider p) {
  switch (p) {
    case LlmProvider::anthropic:
      return "anthropic";
    case LlmProvider::openai:
      return "openai";
    case LlmProvider::automatic:
      break;
  }
  return "";
}

std::string needs_plaintext(const HttpFault& f) {
  if (f.type != HttpFaultType::delay && f.type != HttpFaultType::reset)
    return "a " + std::string(http_fault_type_name(f.type)) + " fault needs the request's content";
  if (f.type == HttpFaultType::delay && f.where == DelayPoint::response)
    return "a delay before the response needs to see the response";
  if (!f.match.method.empty()) return "matching on the method needs the request's content";
  if (!f.match.path.empty()) return "matching on the path needs the request's content";
  if (!f.match.headers.empty()) return "matching on headers needs the request's content";
  if (f.attempts > 0) return "attempts are counted from the request's header and body";
  return {};
}

Status validate_http_fault(const HttpFault& f) {
  if (f.name.empty()) return fault_field_error("name", "must not be empty");
  if (!(f.percent >= 0 && f.percent <= 100)) return fault_field_error("percent", "must be 0..100");
  if (f.attempts < 0) return fault_field_error("attempts", "must not be negative");
  if (f.first_n < 0) return fault_field_error("first_n", "must not be negative");
  if (f.type == HttpFaultType::status && f.status == 0)
    return fault_field_error("attributes.status", "missing (100..599)");
  if (f.type == HttpFaultType::status && f.status < 200 && f.status != 0)
    return fault_field_error("attributes.status", "must be a final status (200..599), got " + std::to_string(f.status));
  if (f.type == HttpFaultType::status && (f.status == 204 || f.status == 304) && !f.body.empty())
    return fault_field_error("attributes.body", "a " + std::to_string(f.status) + " has no body");
  if (f.type == HttpFaultType::delay && f.delay_ms == 0)
    return fault_field_error("attributes.delay", "missing (ms, > 0)");
  return {};
}

json http_fault_to_json(const HttpFault& f) {
  json match = json::object();
  if (!f.match.host.empty()) match["host"] = f.match.host;
  if (!f.match.method.empty()) match["method"] = f.match.method;
  if (!f.match.path.empty()) match["path"] = f.match.path;
  if (!f.match.headers.empty()) {
    json hs = json::array();
    for (const auto& h : f.match.headers)
      hs.push_back(h.has_equals ? json{{"name", h.name}, {"equals", h.equals}}
                                : json{{"name", h.name}, {"contains", h.contains}});
    match["headers"] = hs;
  }
  json a = json::object();
  switch (f.type) {
    case HttpFaultType::status: {
      a["status"] = f.status;
      a["body"] = f.body;
      a["content_type"] = f.content_type;
      json hs = json::object();
      for (const auto& [k, v] : f.headers) hs[k] = v;
      a["headers"] = hs;
      a["delay"] = f.delay_ms;
      break;
    }
    case HttpFaultType::delay:
      a["delay"] = f.delay_ms;
      a["where"] = f.where == DelayPoint::request ? "request" : "response";
      break;
    case HttpFaultType::reset:
      break;
    case HttpFaultType::truncate:
      a["bytes"] = f.bytes;
      break;
    case HttpFaultType::abort_stream:
      a["events"] = f.events;
      break;
    case HttpFaultType::llm:
      a["preset"] = llm_preset_name(f.preset);
      if (f.provider != LlmProvider::automatic) a["provider"] = llm_provider_name(f.provider);
      a["retry_after"] = f.retry_after_s;
      a["hang"] = f.delay_ms;
      a["events"] = f.events;
      break;
  }
  json out{{"name", f.name},         {"type", http_fault_type_name(f.type)},
           {"match", match},         {"percent", f.percent},
           {"attempts", f.attempts}, {"attributes", a}};
  if (f.first_n > 0) out["first_n"] = f.first_n;  // only when set: records made before it read the same
  return out;
}

Result<HttpFault> http_fault_from_json(const json& body) {
  if (!body.is_object()) return fault_field_error("", std::string("a fault is a JSON object, got ") + body.type_name());
  HttpFault f;
  if (!body.contains("type")) return fault_field_error("type", "missing (" + table_names(kHttpFaultTypes) + ")");
  auto type = json_string_field(body["type"], "type");
  if (!type) return type.error();
  auto it =
      std::find_if(kHttpFaultTypes.begin(), kHttpFaultTypes.end(), [&](const auto& p) { return p.first == *type; });
  if (it == kHttpFaultTypes.end())
    return fault_field_error("type", "unknown type \"" + *type + "\" (" + table_names(kHttpFaultTypes) + ")");
  f.type = it->second;
  // Defaults that depend on the type, before the attributes may override them.
  if (f.type == HttpFaultType::llm) {
    f.delay_ms = 30'000;  // timeout: the hang before the 504
    f.events = 3;         // stream-cut
  }
  for (const auto& [key, v] : body.items()) {
    if (key == "type") continue;
    if (key == "name") {
      auto s = json_string_field(v, "name");
      if (!s) return s.error();
      f.name = *s;
      if (f.name.empty() || f.name.size() > 128 || f.name.find('/') != std::string::npos)
        return fault_field_error("name", "must be 1..128 characters without /");
    } else if (key == "match") {
      FL_TRY(read_http_match(v, f.match));
    } else if (key == "percent") {
      if (!v.is_number()) return fault_field_error("percent", std::string("must be a number, got ") + v.type_name());
      f.percent = v.get<double>();
      if (!(f.percent >= 0 && f.percent <= 100)) return fault_field_error("percent", "must be 0..100, got " + v.dump());
    } else if (key == "attempts") {
      auto n = json_int_field(v, "attempts", 0, 1000);
      if (!n) return n.error();
      f.attempts = *n;
    } else if (key == "first_n") {
      auto n = json_int_field(v, "first_n", 0, 1'000'000'000);
      if (!n) return n.error();
      f.first_n = *n;
    } else if (key != "attributes") {
      return fault_field_error(key, "unknown field (name, type, match, percent, attempts, first_n, attributes)");
    }
  }
  if (body.contains("attributes")) FL_TRY(read_http_attributes(body["attributes"], f));
  if (f.name.empty())
    f.name = f.type == HttpFaultType::llm ? "llm_" + std::string(llm_preset_name(f.preset))
                                          : std::string(http_fault_type_name(f.type));
  FL_TRY(validate_http_fault(f));
  return f;
}

}  // namespace faultline
