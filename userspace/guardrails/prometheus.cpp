// The instant-query client.
#include "userspace/guardrails/prometheus.h"

#include <sstream>

namespace faultline {

Result<PrometheusClient> PrometheusClient::create(const PrometheusEndpoint& e) {
  auto base = parse_http_url(e.url);
  if (!base) return input_error(base.error().err, "--prometheus-url " + base.error().message);
  if (base->path.find('?') != std::string::npos)
    return input_error(EINVAL, "--prometheus-url " + e.url + ": give the server's base URL, without a query");
  if (!e.ca_file.empty() && !base->tls)
    return input_error(EINVAL, "--prometheus-ca is for an https:// --prometheus-url; " + e.url + " is plain http");
  while (base->path.size() > 1 && base->path.back() == '/') base->path.pop_back();
  if (base->path == "/") base->path.clear();
  HttpClientOptions o;
  o.tls = base->tls;
  o.ca_file = e.ca_file;
  o.ca_flag = "--prometheus-ca";
  auto client = HttpClient::create(o);
  if (!client) return client.error();
  return PrometheusClient(e, *base, std::move(*client));
}

Result<PromSample> PrometheusClient::query(const std::string& promql, uint64_t timeout_ns) const {
  HttpUrl u = base_;
  std::ostringstream t;
  t << static_cast<double>(timeout_ns) / 1e9;  // seconds: Prometheus reads a plain number so
  u.path = base_.path + "/api/v1/query?query=" + url_encode(promql) + "&timeout=" + url_encode(t.str());
  auto answer = client_.get(u, timeout_ns);
  if (!answer) return answer.error();
  const auto& r = answer->response;
  auto sample = parse_prometheus_answer(r.body);
  const int code = r.status.code;
  if (code >= 200 && code <= 299) return sample;
  // An error answer (400 bad_data, 422 execution, 503 timeout) carries Prometheus' own words.
  if (!sample && sample.error().message.rfind("Prometheus says", 0) == 0)
    return make_error(0, "HTTP " + std::to_string(code) + ": " + sample.error().message);
  return make_error(0, "HTTP " + std::to_string(code) + " from " + base_.text());
}

}  // namespace faultline
