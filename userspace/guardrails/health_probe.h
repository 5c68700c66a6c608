// The HTTP health guardrail: GET a URL (http or https), from inside a namespace
// if asked, within a deadline; healthy only on a 2xx.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "loader/netns.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/http.h"
#include "userspace/guardrails/http_client.h"

namespace faultline {

struct HealthProbeConfig {
  std::string url;
  uint64_t max_latency_ns = 1'000'000'000ULL;
  uint64_t interval_ns = 2'000'000'000ULL;
  std::string netns;    // the probe connects from here (the fault's namespace)
  std::string ca_file;  // --health-ca: trust only this CA for an https URL
};

class HealthProbe final : public Guardrail {
 public:
  [[nodiscard]] static Result<HealthProbe> create(const HealthProbeConfig& cfg);

  // One GET. A refused connection, a timeout, a TLS failure (an unknown CA, a
  // certificate for another name), a status outside 2xx (a redirect too: it is
  // not followed, and a health endpoint that redirects is not answering), or a
  // whole answer slower than max_latency is unhealthy: the fault may be what
  // broke it. The reading's values: latency_ms and status, when an answer came.
  [[nodiscard]] GuardrailReading check() const;
  [[nodiscard]] const HealthProbeConfig& config() const { return cfg_; }

  [[nodiscard]] std::string name() const override { return "health check"; }
  [[nodiscard]] uint64_t interval_ns() const override { return cfg_.interval_ns; }
  [[nodiscard]] GuardrailReading read() override { return check(); }
  [[nodiscard]] nlohmann::json describe() const override;
  [[nodiscard]] std::string summary() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

 private:
  HealthProbe(HealthProbeConfig cfg, HttpUrl url, HttpClient client)
      : cfg_(std::move(cfg)), url_(std::move(url)), client_(std::move(client)) {}
  HealthProbeConfig cfg_;
  HttpUrl url_;
  HttpClient client_;
};

}  // namespace faultline
