// The orchestration tests' Prometheus with slo:* recording rules.
#include "orchestration_env.h"

#include <stdlib.h>

#include <ctime>
#include <filesystem>

namespace florch {

int64_t utc(int year, int mon, int day, int hour, int min) {
  std::tm t{};
  t.tm_year = year - 1900;
  t.tm_mon = mon - 1;
  t.tm_mday = day;
  t.tm_hour = hour;
  t.tm_min = min;
  return static_cast<int64_t>(::timegm(&t));
}

const char* const kSloRules = R"(groups:
  - name: slo
    interval: 1s
    rules:
      - record: slo:burn_rate5m
        expr: max by (service) (app_slo_burn_rate{window="5m"})
      - record: slo:burn_rate1h
        expr: max by (service) (app_slo_burn_rate{window="1h"})
      - record: slo:error_budget_remaining
        expr: min by (service) (app_slo_budget_remaining)
)";

std::string slo_exposition(const std::string& service, double burn_5m, double burn_1h, double budget) {
  const std::string s = "service=\"" + service + "\"";
  return "app_slo_burn_rate{" + s + ",window=\"5m\"} " + std::to_string(burn_5m) + "\n" + "app_slo_burn_rate{" + s +
         ",window=\"1h\"} " + std::to_string(burn_1h) + "\n" + "app_slo_budget_remaining{" + s + "} " +
         std::to_string(budget) + "\n";
}

SloPrometheus::SloPrometheus(const std::string& exposition) {
  char tmpl[] = "/tmp/fl-orch-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  exporter_.set(exposition);
  prom_ = std::make_unique<flenf::PrometheusServer>(dir_, exporter_.port(), kSloRules);
}

SloPrometheus::~SloPrometheus() {
  prom_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool SloPrometheus::ready(std::string& why) {
  if (!prom_->wait_ready(60s)) {
    why = "Prometheus did not become ready:\n" + prom_->log();
    return false;
  }
  return true;
}

std::unique_ptr<faultline::InstantQuery> SloPrometheus::client() const {
  auto c = faultline::prometheus_query(url(), 5'000'000'000ULL);
  if (!c) throw std::runtime_error(c.error().describe());
  return std::move(*c);
}

}  // namespace florch
