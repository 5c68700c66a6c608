// The health probe: one GET through HttpClient per reading, judged on its
// status and its latency.
#include "userspace/guardrails/health_probe.h"

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/units.h"

namespace faultline {
namespace {

// A health endpoint answers in kilobytes; a megabyte is already not a health check.
constexpr size_t kMaxHealthBody = 1024 * 1024;

std::string ms(uint64_t ns) { return std::to_string(ns / 1'000'000) + "ms"; }

}  // namespace

Result<HealthProbe> HealthProbe::create(const HealthProbeConfig& cfg) {
  auto url = parse_http_url(cfg.url);
  if (!url) return input_error(url.error().err, "--health-url " + url.error().message);
  if (!cfg.ca_file.empty() && !url->tls)
    return input_error(EINVAL, "--health-ca is for an https:// --health-url; " + cfg.url + " is plain http");
  auto ns = resolve_netns(cfg.netns);
  if (!ns) return ns.error();
  HttpClientOptions o;
  o.tls = url->tls;
  o.ca_file = cfg.ca_file;
  o.ca_flag = "--health-ca";
  o.netns = *ns;
  o.max_body = kMaxHealthBody;
  auto client = HttpClient::create(o);
  if (!client) return client.error();
  return HealthProbe(cfg, *url, std::move(*client));
}

GuardrailReading HealthProbe::check() const {
  GuardrailReading out;
  out.healthy = false;
  out.t_ns = boottime_ns();
  auto answer = client_.get(url_, cfg_.max_latency_ns);
  if (!answer) {
    out.problem = answer.error().describe();
    return out;
  }
  const int code = answer->response.status.code;
  out.values["latency_ms"] = static_cast<double>(answer->latency_ns) / 1e6;
  out.values["status"] = code;
  if (code < 200 || code > 299) {
    out.problem = "HTTP " + std::to_string(code);
    if (code >= 300 && code <= 399) {
      auto where = answer->response.header("location");
      out.problem += " (a redirect" + (where ? " to " + where->substr(0, 200) : std::string()) +
                     "; not followed: a health endpoint answers 2xx itself)";
    }
    return out;
  }
  if (answer->latency_ns > cfg_.max_latency_ns) {
    out.problem = "slow: " + ms(answer->latency_ns) + " > " + ms(cfg_.max_latency_ns);
    return out;
  }
  out.healthy = true;
  return out;
}

nlohmann::json HealthProbe::describe() const {
  nlohmann::json j{{"health_url", cfg_.url},
                   {"max_latency", format_duration(cfg_.max_latency_ns)},
                   {"interval", format_duration(cfg_.interval_ns)},
                   {"healthy_if", "2xx"}};
  if (url_.tls) j["health_ca"] = cfg_.ca_file.empty() ? "system trust store" : cfg_.ca_file;
  return j;
}

std::string HealthProbe::summary() const {
  return "GET " + cfg_.url + " every " + format_duration(cfg_.interval_ns) + ", healthy if it answers 2xx within " +
         format_duration(cfg_.max_latency_ns) +
         (url_.tls ? std::string(", TLS verified against ") +
                         (cfg_.ca_file.empty() ? "the system trust store" : cfg_.ca_file)
                   : "");
}

nlohmann::json HealthProbe::event(const GuardrailReading& r) const {
  auto value = [&](const char* k) { return r.values.contains(k) ? r.values.at(k) : 0.0; };
  return {{"event", "probe"},
          {"healthy", r.healthy},
          {"latency_ms", value("latency_ms")},
          {"status", static_cast<int>(value("status"))},
          {"problem", r.problem}};
}

}  // namespace faultline
