// What the orchestration tests stand on: a real Prometheus (Debian's
// `prometheus`, the enforce suite's PrometheusServer) on loopback, scraping an
// exporter the test sets, with recording rules that make the slo:* series per
// service, as a production Prometheus records them. Its folder is removed at the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "guardrail_env.h"
#include "userspace/orchestration/facts.h"

namespace florch {

using namespace std::chrono_literals;

// Unix seconds of a UTC wall time (the validator's windows are in UTC).
[[nodiscard]] int64_t utc(int year, int mon, int day, int hour, int min = 0);
// Tuesday 8 December 2026 at HOUR:00 UTC (hour 10: inside the default window,
// weekdays 09-16).
[[nodiscard]] inline int64_t tuesday_at(int hour) { return utc(2026, 12, 8, hour); }

// The recording rules: slo:burn_rate5m, slo:burn_rate1h and
// slo:error_budget_remaining by service, from the exporter's app_slo_burn_rate
// {service, window} and app_slo_budget_remaining {service}.
extern const char* const kSloRules;

// One line per service: its burn rates over 5m and 1h and its budget left.
[[nodiscard]] std::string slo_exposition(const std::string& service, double burn_5m, double burn_1h, double budget);

class SloPrometheus {
 public:
  // Starts Prometheus scraping `exposition`; false (with why) when it did not
  // become ready or record the first service's series in time.
  explicit SloPrometheus(const std::string& exposition);
  ~SloPrometheus();
  SloPrometheus(const SloPrometheus&) = delete;
  SloPrometheus& operator=(const SloPrometheus&) = delete;

  [[nodiscard]] bool ready(std::string& why);
  void set(const std::string& exposition) { exporter_.set(exposition); }
  [[nodiscard]] std::string url() const { return prom_->url(); }
  // A query whose answer the test waits on (a recorded series appearing).
  [[nodiscard]] bool wait_for(const std::string& query, double value) {
    return prom_->wait_for_value(query, value, 30s);
  }
  [[nodiscard]] std::unique_ptr<faultline::InstantQuery> client() const;
  // SIGTERM and wait: its port then refuses (a Prometheus gone silent).
  void stop() { prom_->stop(); }

 private:
  std::string dir_;
  flenf::Exporter exporter_;
  std::unique_ptr<flenf::PrometheusServer> prom_;
};

}  // namespace florch
