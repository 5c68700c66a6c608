// The HTTP health guardrail: GET a URL, from inside a namespace if asked, within a deadline.
#pragma once

#include <cstdint>
#include <string>

#include "loader/netns.h"
#include "loader/result.h"
#include "userspace/guardrails/http.h"

namespace faultline {

struct HealthProbeConfig {
  std::string url;
  uint64_t max_latency_ns = 1'000'000'000ULL;
  uint64_t interval_ns = 2'000'000'000ULL;
  std::string netns;  // the probe connects from here (the fault's namespace)
};

struct ProbeOutcome {
  bool healthy = false;
  uint64_t latency_ns = 0;
  int status = 0;          // HTTP status, 0 if none came
  std::string problem;     // why unhealthy: "timeout after 500ms", "connection refused", ...
};

class HealthProbe {
 public:
  [[nodiscard]] static Result<HealthProbe> create(const HealthProbeConfig& cfg);

  // One GET. A refused connection, a timeout, a status >= 400 or a response
  // slower than max_latency is unhealthy: the fault may be what broke it.
  [[nodiscard]] ProbeOutcome check() const;
  [[nodiscard]] const HealthProbeConfig& config() const { return cfg_; }

 private:
  HealthProbe(HealthProbeConfig cfg, HttpUrl url, NetnsRef ns) : cfg_(std::move(cfg)), url_(std::move(url)), ns_(std::move(ns)) {}
  HealthProbeConfig cfg_;
  HttpUrl url_;
  NetnsRef ns_;
};

}  // namespace faultline
