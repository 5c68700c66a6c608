// Parsing /api/v1/query answers: every way an answer can be wrong is an error
// that says which, never an exception.
#include "userspace/guardrails/prometheus_answer.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace faultline {
namespace {

// Everything a query answer can be wrong by is a query error, never an exception.
Error answer_error(const std::string& what) { return make_error(0, what); }

// Prometheus writes sample values as strings: "1.5", "NaN", "+Inf", "-Inf".
Result<double> parse_sample_value(const nlohmann::json& v) {
  if (!v.is_string()) return answer_error("a sample value that is not a string");
  const auto& s = v.get_ref<const std::string&>();
  if (s == "NaN") return std::nan("");
  if (s == "+Inf" || s == "Inf") return HUGE_VAL;
  if (s == "-Inf") return -HUGE_VAL;
  double d = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty())
    return answer_error("a sample value that is not a number: \"" + s.substr(0, 40) + "\"");
  return d;
}

// [<unix seconds>, "<value>"]
Result<PromSample> parse_pair(const nlohmann::json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number())
    return answer_error("a sample that is not [time, \"value\"]");
  auto v = parse_sample_value(pair[1]);
  if (!v) return v.error();
  PromSample s;
  s.value = *v;
  s.timestamp_s = pair[0].get<double>();
  return s;
}

std::string series_text(const nlohmann::json& metric) {
  if (!metric.is_object()) return "{}";
  std::string name, labels;
  for (const auto& [k, v] : metric.items()) {
    std::string value = v.is_string() ? v.get<std::string>() : v.dump();
    if (k == "__name__") {
      name = value;
      continue;
    }
    if (!labels.empty()) labels += ", ";
    labels += k + "=" + nlohmann::json(value).dump();
  }
  return name + "{" + labels + "}";
}

}  // namespace

Result<PromSample> parse_prometheus_answer(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return answer_error("the answer is not Prometheus JSON");
  auto status = j.find("status");
  if (status == j.end() || !status->is_string()) return answer_error("the answer has no status");
  if (*status != "success") {
    auto text = [&](const char* k) {
      auto it = j.find(k);
      return it != j.end() && it->is_string() ? it->get<std::string>().substr(0, 500) : std::string("?");
    };
    return answer_error("Prometheus says " + text("errorType") + ": " + text("error"));
  }
  auto data = j.find("data");
  if (data == j.end() || !data->is_object()) return answer_error("the answer has no data");
  auto type = data->find("resultType");
  auto result = data->find("result");
  if (type == data->end() || !type->is_string() || result == data->end())
    return answer_error("the answer has no resultType or result");
  const std::string t = type->get<std::string>();
  if (t == "scalar") return parse_pair(*result);
  if (t == "vector") {
    if (!result->is_array()) return answer_error("a vector result that is not a list");
    if (result->empty()) return answer_error("the query matched no series (an empty result)");
    if (result->size() > 1) {
      std::string first = (*result)[0].is_object() ? series_text((*result)[0].value("metric", nlohmann::json())) : "?";
      return answer_error("the query returned " + std::to_string(result->size()) + " series (" + first +
                          ", ...): it must return one; aggregate it (sum, max, ...)");
    }
    const auto& one = (*result)[0];
    if (!one.is_object() || !one.contains("value")) return answer_error("a vector element without a value");
    auto s = parse_pair(one["value"]);
    if (!s) return s.error();
    s->series = series_text(one.value("metric", nlohmann::json()));
    return s;
  }
  return answer_error("the query returned a " + t + ", not a number (a scalar or one series)");
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  std::ostringstream o;
  o.precision(6);
  o << v;
  return o.str();
}

}  // namespace faultline
