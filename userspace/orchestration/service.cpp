// The service model's reader and writer, and its chaos window.
#include "userspace/orchestration/service.h"

#include <array>
#include <cstdio>
#include <set>

#include "userspace/guardrails/http.h"

namespace faultline {
namespace {

constexpr std::array<const char*, 7> kDays = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
constexpr std::array<const char*, 7> kDayNames = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr size_t kMaxInstances = 256, kMaxEndpoints = 64, kMaxLabels = 64, kMaxText = 4096;
const std::set<std::string> kTopFields = {"name", "labels",        "instances", "endpoints", "health_url",
                                          "slo",  "min_available", "stateful",  "chaos",     "window"};

bool metric_name(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool label_name(const std::string& s) { return metric_name(s) && s.find(':') == std::string::npos; }

// Unknown members of an object are refused, naming the first.
std::optional<SpecError> only_fields(const nlohmann::json& obj, const std::set<std::string>& known,
                                     const std::string& path) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.count(it.key())) return SpecError{path + it.key(), "unknown field"};
  return std::nullopt;
}

std::optional<SpecError> read_instances(const nlohmann::json& j, ServiceSpec& s) {
  if (!j.is_array()) return SpecError{"instances", "must be an array of {agent, cgroup}"};
  if (j.size() > kMaxInstances) return SpecError{"instances", "at most 256"};
  std::set<std::pair<int64_t, std::string>> seen;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "instances[" + std::to_string(i) + "]";
    const auto& e = j[i];
    if (!e.is_object()) return SpecError{at, "must be an object {agent, cgroup}"};
    if (auto bad = only_fields(e, {"agent", "cgroup"}, at + ".")) return bad;
    if (!e.contains("agent") || !e["agent"].is_number_integer() || e["agent"].get<int64_t>() < 1)
      return SpecError{at + ".agent", "required: an agent id (a positive integer)"};
    if (!e.contains("cgroup") || !e["cgroup"].is_string())
      return SpecError{at + ".cgroup", "required: the instance's cgroup v2 path"};
    ServiceInstance inst{e["agent"].get<int64_t>(), e["cgroup"].get<std::string>()};
    if (inst.cgroup.empty() || inst.cgroup[0] != '/' || inst.cgroup.size() > kMaxText ||
        inst.cgroup.find("/../") != std::string::npos || inst.cgroup.ends_with("/..") ||
        inst.cgroup.find('\0') != std::string::npos)
      return SpecError{at + ".cgroup", "must be an absolute cgroup path (\"/system.slice/app.service\"), without .."};
    if (!seen.insert({inst.agent, inst.cgroup}).second)
      return SpecError{at, "the same agent and cgroup are listed twice"};
    s.instances.push_back(std::move(inst));
  }
  return std::nullopt;
}

std::optional<SpecError> read_endpoints(const nlohmann::json& j, ServiceSpec& s) {
  if (!j.is_array()) return SpecError{"endpoints", "must be an array of \"host:port\""};
  if (j.size() > kMaxEndpoints) return SpecError{"endpoints", "at most 64"};
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "endpoints[" + std::to_string(i) + "]";
    if (!j[i].is_string()) return SpecError{at, "must be \"host:port\""};
    const std::string e = j[i].get<std::string>();
    const size_t colon = e.rfind(':');
    if (colon == std::string::npos || colon == 0 || e.size() > 300)
      return SpecError{at, "\"" + e + "\" is not host:port"};
    const std::string port = e.substr(colon + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) < 1 || std::stoi(port) > 65535)
      return SpecError{at, "\"" + e + "\": the port must be 1-65535"};
    s.endpoints.push_back(e);
  }
  return std::nullopt;
}

std::optional<SpecError> read_slo(const nlohmann::json& j, ServiceSpec& s) {
  if (!j.is_object())
    return SpecError{"slo", "must be an object {burn_rate_5m, burn_rate_1h, budget_remaining, label}"};
  if (auto bad = only_fields(j, {"burn_rate_5m", "burn_rate_1h", "budget_remaining", "label"}, "slo.")) return bad;
  for (auto [key, dest] : {std::pair<const char*, std::string*>{"burn_rate_5m", &s.slo.burn_rate_5m},
                           {"burn_rate_1h", &s.slo.burn_rate_1h},
                           {"budget_remaining", &s.slo.budget_remaining},
                           {"label", &s.slo.label}}) {
    if (!j.contains(key)) continue;
    const std::string field = std::string("slo.") + key;
    if (!j[key].is_string()) return SpecError{field, "must be a string"};
    const std::string v = j[key].get<std::string>();
    const bool label = std::string(key) == "label";
    if (label ? !label_name(v) : !metric_name(v))
      return SpecError{field, "\"" + v + "\" is not a Prometheus " + (label ? "label" : "metric") +
                                  " name (a series' name, not an expression: the service's label is added)"};
    *dest = v;
  }
  return std::nullopt;
}

std::optional<SpecError> read_window(const nlohmann::json& j, ServiceSpec& s) {
  if (!j.is_object()) return SpecError{"window", "must be an object {days, from_hour, to_hour}"};
  if (auto bad = only_fields(j, {"days", "from_hour", "to_hour"}, "window.")) return bad;
  if (j.contains("days")) {
    const auto& d = j["days"];
    if (!d.is_array() || d.empty()) return SpecError{"window.days", "must be a non-empty array of \"mon\"..\"sun\""};
    uint8_t days = 0;
    for (const auto& day : d) {
      size_t n = kDays.size();
      if (day.is_string())
        for (size_t i = 0; i < kDays.size(); ++i)
          if (day.get<std::string>() == kDays[i]) n = i;
      if (n == kDays.size()) return SpecError{"window.days", day.dump() + " is not one of mon tue wed thu fri sat sun"};
      if (days & (1u << n)) return SpecError{"window.days", day.dump() + " is listed twice"};
      days = static_cast<uint8_t>(days | (1u << n));
    }
    s.window.days = days;
  }
  for (auto [key, dest, lo, hi] : {std::tuple<const char*, int*, int, int>{"from_hour", &s.window.from_hour, 0, 23},
                                   {"to_hour", &s.window.to_hour, 1, 24}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < lo || j[key].get<int64_t>() > hi)
      return SpecError{std::string("window.") + key,
                       "must be a whole hour " + std::to_string(lo) + "-" + std::to_string(hi) + " (UTC)"};
    *dest = j[key].get<int>();
  }
  if (s.window.from_hour >= s.window.to_hour)
    return SpecError{"window.to_hour", "must be after from_hour (a window within one UTC day)"};
  return std::nullopt;
}

}  // namespace

bool valid_service_name(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(i > 0 && (c == '.' || c == '_' || c == '-'))) return false;
  }
  return true;
}

std::variant<ServiceSpec, SpecError> read_service_spec(const nlohmann::json& j) {
  if (!j.is_object()) return SpecError{"", "a service is a JSON object"};
  if (auto bad = only_fields(j, kTopFields, "")) return *bad;
  ServiceSpec s;
  if (!j.contains("name") || !j["name"].is_string()) return SpecError{"name", "required: a string"};
  s.name = j["name"].get<std::string>();
  if (!valid_service_name(s.name))
    return SpecError{"name", "must be 1-63 of a-z 0-9 . _ - starting with a letter or digit"};
  if (j.contains("labels")) {
    const auto& l = j["labels"];
    if (!l.is_object()) return SpecError{"labels", "must be an object of strings"};
    if (l.size() > kMaxLabels) return SpecError{"labels", "at most 64"};
    for (auto it = l.begin(); it != l.end(); ++it) {
      if (!label_name(it.key()) || it.key().size() > 63)
        return SpecError{"labels." + it.key(), "a label's name is 1-63 of a-z A-Z 0-9 _"};
      if (!it->is_string() || it->get<std::string>().size() > 256)
        return SpecError{"labels." + it.key(), "must be a string of at most 256 characters"};
      s.labels[it.key()] = it->get<std::string>();
    }
  }
  if (!j.contains("instances")) return SpecError{"instances", "required: [{agent, cgroup}, ...]"};
  if (auto bad = read_instances(j["instances"], s)) return *bad;
  if (j.contains("endpoints"))
    if (auto bad = read_endpoints(j["endpoints"], s)) return *bad;
  if (j.contains("health_url")) {
    if (!j["health_url"].is_string()) return SpecError{"health_url", "must be an http:// or https:// URL"};
    s.health_url = j["health_url"].get<std::string>();
    if (auto u = parse_http_url(s.health_url); !u) return SpecError{"health_url", u.error().message};
  }
  if (j.contains("slo"))
    if (auto bad = read_slo(j["slo"], s)) return *bad;
  if (j.contains("min_available")) {
    const auto& m = j["min_available"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1 ||
        m.get<int64_t>() > static_cast<int64_t>(std::max<size_t>(s.instances.size(), 1)))
      return SpecError{"min_available",
                       "must be 1 to the number of instances (" + std::to_string(s.instances.size()) + ")"};
    s.min_available = m.get<int64_t>();
  }
  if (j.contains("stateful")) {
    if (!j["stateful"].is_boolean()) return SpecError{"stateful", "must be true or false"};
    s.stateful = j["stateful"].get<bool>();
  }
  if (j.contains("chaos")) {
    if (!j["chaos"].is_string() || (j["chaos"] != "enabled" && j["chaos"] != "disabled"))
      return SpecError{"chaos", "must be \"enabled\" (opted in) or \"disabled\""};
    s.chaos_enabled = j["chaos"] == "enabled";
  }
  if (j.contains("window"))
    if (auto bad = read_window(j["window"], s)) return *bad;
  return s;
}

nlohmann::json service_spec_json(const ServiceSpec& s) {
  nlohmann::json instances = nlohmann::json::array();
  for (const auto& i : s.instances) instances.push_back({{"agent", i.agent}, {"cgroup", i.cgroup}});
  nlohmann::json days = nlohmann::json::array();
  for (size_t i = 1; i <= 7; ++i)  // Monday first
    if (s.window.days & (1u << (i % 7))) days.push_back(kDays[i % 7]);
  nlohmann::json j = {
      {"name", s.name},
      {"labels", s.labels},
      {"instances", instances},
      {"endpoints", s.endpoints},
      {"slo",
       {{"burn_rate_5m", s.slo.burn_rate_5m},
        {"burn_rate_1h", s.slo.burn_rate_1h},
        {"budget_remaining", s.slo.budget_remaining},
        {"label", s.slo.label}}},
      {"stateful", s.stateful},
      {"chaos", s.chaos_enabled ? "enabled" : "disabled"},
      {"window", {{"days", days}, {"from_hour", s.window.from_hour}, {"to_hour", s.window.to_hour}}},
  };
  if (!s.health_url.empty()) j["health_url"] = s.health_url;
  if (s.min_available) j["min_available"] = *s.min_available;
  return j;
}

std::string slo_selector(const ServiceSpec& s, const std::string& series) {
  // The name is [a-z0-9._-] (valid_service_name): nothing to escape.
  return series + "{" + s.slo.label + "=\"" + s.name + "\"}";
}

bool ChaosWindow::contains(int64_t start_s, int64_t end_s) const {
  if (end_s < start_s) return false;
  const int64_t day = start_s >= 0 ? start_s / 86400 : (start_s - 86399) / 86400;
  const int wday = static_cast<int>(((day + 4) % 7 + 7) % 7);  // 1970-01-01 was a Thursday
  if (!(days & (1u << wday))) return false;
  const int64_t opens = day * 86400 + from_hour * 3600, closes = day * 86400 + to_hour * 3600;
  return start_s >= opens && end_s <= closes;
}

std::string ChaosWindow::describe() const {
  std::string d;
  if (days == 0b0111110) {
    d = "Mon-Fri";
  } else if (days == 0b1111111) {
    d = "every day";
  } else {
    for (size_t i = 1; i <= 7; ++i)
      if (days & (1u << (i % 7))) d += (d.empty() ? "" : ",") + std::string(kDayNames[i % 7]);
  }
  char hours[32];
  std::snprintf(hours, sizeof hours, " %02d:00-%02d:00 UTC", from_hour, to_hour);
  return d + hours;
}

}  // namespace faultline
