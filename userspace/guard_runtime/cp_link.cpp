// faultctl's faultcp calls: bearer token, JSON or NDJSON bodies, one deadline each.
#include "userspace/guard_runtime/cp_link.h"

#include <cstdlib>

namespace faultline {

Result<CpLink> CpLink::create(const std::string& url, const std::string& token, Options options) {
  auto base = parse_http_url(url);
  if (!base) return input_error(0, "--control-plane " + url + ": " + base.error().message);
  if (base->path.find('?') != std::string::npos)
    return input_error(0, "--control-plane " + url + ": give faultcp's base URL, without a query");
  while (!base->path.empty() && base->path.back() == '/') base->path.pop_back();
  if (token.empty())
    return input_error(0, "--control-plane needs a token: --token or FAULTLINE_CP_TOKEN (" + options.token_hint + ")");
  HttpClientOptions o;
  o.tls = base->tls;
  if (const char* ca = std::getenv("FAULTLINE_CP_CA"); ca != nullptr && *ca != '\0') {
    o.ca_file = ca;
    o.ca_flag = "FAULTLINE_CP_CA";
  }
  if (options.max_body != 0) o.max_body = options.max_body;
  auto client = HttpClient::create(o);
  if (!client) return client.error();
  return CpLink(std::move(*base), token, std::move(*client), options.timeout_ms);
}

Result<HttpAnswer> CpLink::call(const std::string& method, const std::string& path, const std::string& body,
                                const std::string& content_type, uint64_t timeout_ms, int cancel_fd) const {
  HttpUrl u = base_;
  u.path = base_.path + path;
  HttpCall c;
  c.method = method;
  c.headers = {{"Authorization", "Bearer " + token_}, {"Accept", "application/json"}};
  if (!body.empty()) c.headers.emplace_back("Content-Type", content_type);
  c.body = body;
  c.cancel_fd = cancel_fd;
  return client_.call(u, c, (timeout_ms != 0 ? timeout_ms : timeout_ms_) * 1'000'000ULL);
}

std::optional<nlohmann::json> answer_object(const HttpAnswer& a) {
  auto j = nlohmann::json::parse(a.response.body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string answer_problem(const Result<HttpAnswer>& a) {
  if (!a) return a.error().describe();
  std::string msg = a->response.body.substr(0, 300);
  if (auto j = answer_object(*a); j && j->contains("error") && (*j)["error"].is_string())
    msg = (*j)["error"].get<std::string>();
  return "HTTP " + std::to_string(a->response.status.code) + ": " + msg;
}

}  // namespace faultline
