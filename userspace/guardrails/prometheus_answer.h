// What an instant query (GET /api/v1/query) answers, read as one number: the
// parser of bytes a Prometheus server (or whatever answers on its port) sends.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace faultline {

// One number from an instant query.
struct PromSample {
  double value = 0;    // may be NaN or +-Inf: Prometheus says so in words
  std::string series;  // the series' labels as PromQL text ({job="api"}); "" for a scalar
  double timestamp_s = 0;
};

// Reads the body of an /api/v1/query answer. A scalar, or a vector of exactly
// one series, is a sample. Everything else is an error that says which: an
// "error" status (with Prometheus' errorType and message), an empty vector (no
// series matched), a vector of several series (the query must aggregate), a
// matrix or a string, or bytes that are not that JSON. Untrusted bytes: fuzzed
// in selftests/fuzz.
[[nodiscard]] Result<PromSample> parse_prometheus_answer(std::string_view body);

// A number for people: "0.25", "1.5e+06", "NaN", "+Inf".
[[nodiscard]] std::string format_value(double v);

}  // namespace faultline
