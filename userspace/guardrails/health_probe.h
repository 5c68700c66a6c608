// The HTTP health guardrail: GET a URL, from inside a namespace if asked, within a deadline.
#pragma once

#include <cstdint>
#include <string>

#include "loader/netns.h"
#include "base/result.h"
#include "userspace/guardrails/guardrail.h"
#include "userspace/guardrails/http.h"

namespace faultline {

struct HealthProbeConfig {
  std::string url;
  uint64_t max_latency_ns = 1'000'000'000ULL;
  uint64_t interval_ns = 2'000'000'000ULL;
  std::string netns;  // the probe connects from here (the fault's namespace)
};

class HealthProbe final : public Guardrail {
 public:
  [[nodiscard]] static Result<HealthProbe> create(const HealthProbeConfig& cfg);

  // One GET. A refused connection, a timeout, a status >= 400 or a response
  // slower than max_latency is unhealthy: the fault may be what broke it. The
  // reading's values: latency_ms (when an answer came) and status (HTTP).
  [[nodiscard]] GuardrailReading check() const;
  [[nodiscard]] const HealthProbeConfig& config() const { return cfg_; }

  [[nodiscard]] std::string name() const override { return "health check"; }
  [[nodiscard]] uint64_t interval_ns() const override { return cfg_.interval_ns; }
  [[nodiscard]] GuardrailReading read() override { return check(); }
  [[nodiscard]] nlohmann::json describe() const override;
  [[nodiscard]] nlohmann::json event(const GuardrailReading& r) const override;

 private:
  HealthProbe(HealthProbeConfig cfg, HttpUrl url, NetnsRef ns) : cfg_(std::move(cfg)), url_(std::move(url)), ns_(std::move(ns)) {}
  HealthProbeConfig cfg_;
  HttpUrl url_;
  NetnsRef ns_;
};

}  // namespace faultline
