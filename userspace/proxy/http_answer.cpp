// The proxy's own responses. The LLM presets follow what the providers were
// seen to send (docs/l7.md lists the bytes): Anthropic's JSON envelope with a
// request-id header and x-should-retry, its anthropic-ratelimit-* family with
// RFC 3339 resets; OpenAI's {"error": {message, type, param, code}} with
// x-request-id and x-ratelimit-* resets as durations ("1s", "6m0s"); the
// gateway pages (502, 504) as the CDN in front of both writes them, in HTML.
#include "userspace/proxy/http_answer.h"

#include <algorithm>
#include <cctype>

#include "userspace/proxy/toxic_plan.h"

namespace faultline {
namespace {

bool iequals_suffix(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  s = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < s.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != suffix[i]) return false;
  return true;
}

bool icontains(std::string_view s, std::string_view needle) {
  for (size_t i = 0; i + needle.size() <= s.size(); ++i) {
    bool ok = true;
    for (size_t j = 0; j < needle.size() && ok; ++j)
      ok = std::tolower(static_cast<unsigned char>(s[i + j])) == needle[j];
    if (ok) return true;
  }
  return false;
}

std::string random_id(std::string_view alphabet, size_t n, uint64_t& state) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    state += 0x9e3779b97f4a7c15ULL;
    s += alphabet[splitmix64(state) % alphabet.size()];
  }
  return s;
}

std::string rfc3339(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string http_date(std::time_t t) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

// OpenAI's reset durations: "1s", "59s", "6m0s", "1h2m3s".
std::string go_duration(int64_t s) {
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  return std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m" + std::to_string(s % 60) + "s";
}

std::string gateway_page(int status) {
  std::string title =
      std::to_string(status) + " " + std::string(status == 504 ? "Gateway Time-out" : reason_phrase(status));
  return "<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
         "</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n";
}

LlmAnswer gateway_answer(int status, std::time_t now) {
  return LlmAnswer{status,
                   {{"Date", http_date(now)}, {"Content-Type", "text/html"}, {"Server", "cloudflare"}},
                   gateway_page(status)};
}

LlmAnswer anthropic_answer(LlmPreset preset, int64_t retry_after_s, uint64_t& seed, std::time_t now) {
  const std::string id = "req_011C" + random_id("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz", 20, seed);
  int status = 0;
  std::string type;
  std::string message;
  HeaderList h{{"Date", http_date(now)}, {"Content-Type", "application/json"}};
  switch (preset) {
    case LlmPreset::overloaded:
      status = 529;
      type = "overloaded_error";
      message = "Overloaded";
      break;
    case LlmPreset::rate_limit: {
      status = 429;
      type = "rate_limit_error";
      message =
          "This request would exceed the rate limit for your organization of 50 requests per minute. "
          "For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for "
          "current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.";
      const std::string reset = rfc3339(now + std::max<int64_t>(retry_after_s, 1));
      if (retry_after_s > 0) h.emplace_back("retry-after", std::to_string(retry_after_s));
      h.emplace_back("anthropic-ratelimit-requests-limit", "50");
      h.emplace_back("anthropic-ratelimit-requests-remaining", "0");
      h.emplace_back("anthropic-ratelimit-requests-reset", reset);
      h.emplace_back("anthropic-ratelimit-input-tokens-limit", "30000");
      h.emplace_back("anthropic-ratelimit-input-tokens-remaining", "30000");
      h.emplace_back("anthropic-ratelimit-input-tokens-reset", rfc3339(now));
      h.emplace_back("anthropic-ratelimit-output-tokens-limit", "8000");
      h.emplace_back("anthropic-ratelimit-output-tokens-remaining", "8000");
      h.emplace_back("anthropic-ratelimit-output-tokens-reset", rfc3339(now));
      h.emplace_back("anthropic-ratelimit-tokens-limit", "38000");
      h.emplace_back("anthropic-ratelimit-tokens-remaining", "38000");
      h.emplace_back("anthropic-ratelimit-tokens-reset", rfc3339(now));
      break;
    }
    case LlmPreset::server_error:
      status = 500;
      type = "api_error";
      message = "Internal server error";
      break;
    default:
      return {};
  }
  h.emplace_back("request-id", id);
  h.emplace_back("x-should-retry", "true");
  h.emplace_back("Server", "cloudflare");
  std::string body = R"({"type":"error","error":{"type":")" + type + R"(","message":")" + message +
                     R"("},"request_id":")" + id + R"("})";
  return LlmAnswer{status, std::move(h), std::move(body)};
}

LlmAnswer openai_answer(LlmPreset preset, int64_t retry_after_s, uint64_t& seed, std::time_t now) {
  const std::string id = "req_" + random_id("0123456789abcdef", 32, seed);
  int status = 0;
  std::string message;
  std::string type;
  std::string code = "null";
  HeaderList h{{"Date", http_date(now)}, {"Content-Type", "application/json"}};
  switch (preset) {
    case LlmPreset::overloaded:
      status = 503;
      message = "Our servers are currently overloaded. Please try again later.";
      type = "service_unavailable_error";
      code = R"("server_is_overloaded")";
      break;
    case LlmPreset::rate_limit: {
      status = 429;
      const int64_t wait = std::max<int64_t>(retry_after_s, 1);
      message =
          "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in " +
          std::to_string(wait) + "s. Visit https://platform.openai.com/account/rate-limits to learn more.";
      type = "requests";
      code = R"("rate_limit_exceeded")";
      if (retry_after_s > 0) h.emplace_back("retry-after", std::to_string(retry_after_s));
      h.emplace_back("x-ratelimit-limit-requests", "500");
      h.emplace_back("x-ratelimit-remaining-requests", "0");
      h.emplace_back("x-ratelimit-reset-requests", go_duration(wait));
      h.emplace_back("x-ratelimit-limit-tokens", "30000");
      h.emplace_back("x-ratelimit-remaining-tokens", "30000");
      h.emplace_back("x-ratelimit-reset-tokens", "0s");
      break;
    }
    case LlmPreset::server_error:
      status = 500;
      message = "The server had an error while processing your request. Sorry about that!";
      type = "server_error";
      break;
    default:
      return {};
  }
  h.emplace_back("x-request-id", id);
  h.emplace_back("openai-version", "2020-10-01");
  h.emplace_back("Server", "cloudflare");
  std::string body = "{\n  \"error\": {\n    \"message\": \"" + message + "\",\n    \"type\": \"" + type +
                     "\",\n    \"param\": null,\n    \"code\": " + code + "\n  }\n}\n";
  return LlmAnswer{status, std::move(h), std::move(body)};
}

}  // namespace

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 529:
      return "Overloaded";
    default:
      return "Status";
  }
}

std::string compose_http_response(int status, const HeaderList& headers, std::string_view body, bool keep_alive,
                                  bool head_request) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  const bool no_body = status == 204 || status == 304 || (status >= 100 && status < 200);
  if (!no_body) out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  if (!no_body && !head_request) out += body;
  return out;
}

LlmProvider infer_llm_provider(std::string_view host, std::string_view path, bool has_anthropic_version) {
  std::string_view name = host.substr(0, host.rfind(':') == std::string_view::npos ? host.size() : host.rfind(':'));
  if (iequals_suffix(name, "anthropic.com") || icontains(name, "anthropic") || icontains(name, "claude"))
    return LlmProvider::anthropic;
  if (iequals_suffix(name, "openai.com") || icontains(name, "openai")) return LlmProvider::openai;
  if (has_anthropic_version) return LlmProvider::anthropic;
  if (path.rfind("/v1/messages", 0) == 0) return LlmProvider::anthropic;
  return LlmProvider::openai;
}

LlmAnswer llm_answer(LlmPreset preset, LlmProvider provider, int64_t retry_after_s, uint64_t seed, std::time_t now) {
  switch (preset) {
    case LlmPreset::bad_gateway:
      return gateway_answer(502, now);
    case LlmPreset::timeout:
      return gateway_answer(504, now);
    case LlmPreset::stream_cut:
      return {};
    default:
      break;
  }
  return provider == LlmProvider::anthropic ? anthropic_answer(preset, retry_after_s, seed, now)
                                            : openai_answer(preset, retry_after_s, seed, now);
}

}  // namespace faultline
