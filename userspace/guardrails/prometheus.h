// Prometheus' HTTP API as the guardrails use it: one instant query
// (GET /api/v1/query) whose answer must be one number.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "userspace/guardrails/http.h"
#include "userspace/guardrails/http_client.h"
#include "userspace/guardrails/prometheus_answer.h"

namespace faultline {

// Where the Prometheus guardrails ask, and how long they wait.
struct PrometheusEndpoint {
  std::string url;      // --prometheus-url: the server's base URL (a path prefix is kept)
  std::string ca_file;  // --prometheus-ca: trust only this CA for an https URL
};

class PrometheusClient {
 public:
  // A URL with a query string, or credentials, is bad input.
  [[nodiscard]] static Result<PrometheusClient> create(const PrometheusEndpoint& e);

  // One instant query, evaluated at "now", answered within timeout_ns (also
  // passed to Prometheus as its own timeout). A non-2xx answer is an error with
  // Prometheus' own message when it sent one.
  [[nodiscard]] Result<PromSample> query(const std::string& promql, uint64_t timeout_ns) const;

  [[nodiscard]] const std::string& url() const { return endpoint_.url; }

 private:
  PrometheusClient(PrometheusEndpoint e, HttpUrl base, HttpClient client)
      : endpoint_(std::move(e)), base_(std::move(base)), client_(std::move(client)) {}
  PrometheusEndpoint endpoint_;
  HttpUrl base_;
  HttpClient client_;
};

}  // namespace faultline
