// A service as the orchestration knows it: where its instances run (an agent
// and a cgroup each), how it is reached, where its SLO lives in Prometheus, and
// what it allows (opted in, its window, stateful, min_available). Read from
// JSON (faultcp's POST /v1/services) with every field checked and named.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace faultline {

struct ServiceInstance {
  int64_t agent = 0;   // the agent (faultd) of the host it runs on
  std::string cgroup;  // its cgroup v2 path there ("/system.slice/checkout.service")
};

// The SLO's recorded series. Each is a metric name, queried with the service's
// own label ({service="checkout"}), so a series of another service never answers.
struct SloSeries {
  std::string burn_rate_5m = "slo:burn_rate5m";
  std::string burn_rate_1h = "slo:burn_rate1h";
  std::string budget_remaining = "slo:error_budget_remaining";  // a ratio of the 30-day budget, 1 = untouched
  std::string label = "service";
};

// When automation may fault the service: whole hours of the given weekdays, UTC.
struct ChaosWindow {
  uint8_t days = 0b0111110;  // bit n: tm_wday n (0 Sunday); Monday-Friday
  int from_hour = 9;         // inclusive
  int to_hour = 16;          // exclusive (24: midnight)

  // The run [start_s, end_s) lies within one day's window.
  [[nodiscard]] bool contains(int64_t start_s, int64_t end_s) const;
  // "Mon-Fri 09:00-16:00 UTC" / "Mon,Wed 10:00-12:00 UTC".
  [[nodiscard]] std::string describe() const;
};

struct ServiceSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<ServiceInstance> instances;
  std::vector<std::string> endpoints;  // "host:port"
  std::string health_url;              // empty: none given
  SloSeries slo;
  std::optional<int64_t> min_available;  // none: not said, so a kill has no floor to keep
  bool stateful = false;
  bool chaos_enabled = false;  // "chaos": "enabled"; anything else is not opted in
  ChaosWindow window;
};

// A field that is wrong ("instances[1].cgroup") and why.
struct SpecError {
  std::string field;
  std::string message;
  [[nodiscard]] std::string text() const { return field.empty() ? message : field + ": " + message; }
};

// The body of POST /v1/services. Unknown fields, wrong types and values out of
// range are refused naming the field; defaults fill what is not given.
[[nodiscard]] std::variant<ServiceSpec, SpecError> read_service_spec(const nlohmann::json& j);
// Every field, defaults included: read_service_spec() reads it back to the same spec.
[[nodiscard]] nlohmann::json service_spec_json(const ServiceSpec& s);

// A service's name: 1-63 of [a-z0-9._-], starting with a letter or digit (it
// is written into PromQL label matchers, so nothing else is let in).
[[nodiscard]] bool valid_service_name(const std::string& name);

// `series{label="name"}`: one SLO series of this service, as PromQL.
[[nodiscard]] std::string slo_selector(const ServiceSpec& s, const std::string& series);

}  // namespace faultline
