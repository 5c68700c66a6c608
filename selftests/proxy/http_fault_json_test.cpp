// HTTP faults: their JSON both ways and its errors, and the LLM presets' bytes
// (status, envelope, headers) for each provider.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "userspace/proxy/http_answer.h"
#include "userspace/proxy/http_fault.h"

namespace {

using faultline::LlmPreset;
using faultline::LlmProvider;

std::string header_of(const faultline::LlmAnswer& a, const std::string& name) {
  for (const auto& [k, v] : a.headers)
    if (k == name) return v;
  return "<none>";
}

TEST(HttpFaultJson, RoundTripsEveryType) {
  const char* bodies[] = {
      R"({"name":"s","type":"status","match":{"host":"api.x","method":"POST","path":"/p*",
          "headers":[{"name":"x-a","equals":"1"},{"name":"x-b","contains":"2"}]},"percent":30,"attempts":2,
          "attributes":{"status":503,"body":"b","content_type":"text/x","headers":{"X-H":"v"},"delay":5}})",
      R"({"name":"d","type":"delay","attributes":{"delay":200,"where":"response"}})",
      R"({"name":"r","type":"reset"})",
      R"({"name":"t","type":"truncate","attributes":{"bytes":512}})",
      R"({"name":"a","type":"abort_stream","attributes":{"events":4}})",
      R"({"name":"l","type":"llm","attributes":{"preset":"rate-limit","provider":"openai","retry_after":3,"hang":10,"events":2}})",
  };
  for (const char* b : bodies) {
    auto f = faultline::http_fault_from_json(nlohmann::json::parse(b));
    ASSERT_TRUE(f.ok()) << b << ": " << f.error().describe();
    const nlohmann::json out = faultline::http_fault_to_json(*f);
    auto again = faultline::http_fault_from_json(out);
    ASSERT_TRUE(again.ok()) << out.dump() << ": " << again.error().describe();
    EXPECT_EQ(faultline::http_fault_to_json(*again), out) << b;
  }
}

TEST(HttpFaultJson, DefaultsNameAndLlmValues) {
  auto f =
      faultline::http_fault_from_json(nlohmann::json::parse(R"({"type":"llm","attributes":{"preset":"timeout"}})"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->name, "llm_timeout");
  EXPECT_EQ(f->delay_ms, 30000) << "the default hang";
  EXPECT_EQ(f->events, 3);
  EXPECT_EQ(f->percent, 100);
  EXPECT_EQ(f->provider, LlmProvider::automatic);
}

TEST(HttpFaultJson, BadFieldsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"status","attributes":{"status":503,"body":5}})",
       R"(http fault: "attributes.body": must be a string, got number)"},
      {R"({"type":"truncate","attributes":{"bytes":1.5}})",
       R"(http fault: "attributes.bytes": must be a whole number, got 1.5)"},
      {R"({"type":"reset","attributes":{"bytes":1}})",
       R"(http fault: "attributes.bytes": not an attribute of reset (it has none))"},
      {R"({"type":"status","attributes":{"status":204,"body":"x"}})",
       R"(http fault: "attributes.body": a 204 has no body)"},
      {R"({"type":"status","attributes":{"status":101}})",
       R"(http fault: "attributes.status": must be a final status (200..599), got 101)"},
      {R"({"type":"delay"})", R"(http fault: "attributes.delay": missing (ms, > 0))"},
      {R"({"type":"reset","match":{"method":"GE T"}})", R"(http fault: "match.method": not an HTTP method: GE T)"},
      {R"({"type":"reset","name":"a/b"})", R"(http fault: "name": must be 1..128 characters without /)"},
  };
  for (const auto& [body, message] : cases) {
    auto f = faultline::http_fault_from_json(nlohmann::json::parse(body));
    ASSERT_FALSE(f.ok()) << body;
    EXPECT_EQ(f.error().message, message) << body;
    EXPECT_TRUE(f.error().bad_input);
  }
}

TEST(LlmAnswer, AnthropicOverloadedIs529WithItsEnvelopeAndRequestId) {
  const auto a = faultline::llm_answer(LlmPreset::overloaded, LlmProvider::anthropic, 1, 42, 1764650000);
  EXPECT_EQ(a.status, 529);
  const auto j = nlohmann::json::parse(a.body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"], (nlohmann::json{{"type", "overloaded_error"}, {"message", "Overloaded"}}));
  EXPECT_EQ(j["request_id"], header_of(a, "request-id"));
  EXPECT_EQ(header_of(a, "request-id").rfind("req_011C", 0), 0u);
  EXPECT_EQ(header_of(a, "x-should-retry"), "true");
  EXPECT_EQ(header_of(a, "Content-Type"), "application/json");
}

TEST(LlmAnswer, RateLimitsCarryEachProvidersResetFormat) {
  const std::time_t now = 1764650000;  // 2025-12-02T04:33:20Z
  const auto an = faultline::llm_answer(LlmPreset::rate_limit, LlmProvider::anthropic, 90, 1, now);
  EXPECT_EQ(an.status, 429);
  EXPECT_EQ(header_of(an, "retry-after"), "90");
  EXPECT_EQ(header_of(an, "anthropic-ratelimit-requests-remaining"), "0");
  EXPECT_EQ(header_of(an, "anthropic-ratelimit-requests-reset"), "2025-12-02T04:34:50Z");
  EXPECT_EQ(nlohmann::json::parse(an.body)["error"]["type"], "rate_limit_error");
  const auto oa = faultline::llm_answer(LlmPreset::rate_limit, LlmProvider::openai, 90, 1, now);
  EXPECT_EQ(oa.status, 429);
  EXPECT_EQ(header_of(oa, "x-ratelimit-reset-requests"), "1m30s");
  EXPECT_EQ(header_of(oa, "x-should-retry"), "<none>") << "OpenAI does not send it";
  const auto err = nlohmann::json::parse(oa.body)["error"];
  EXPECT_EQ(err["code"], "rate_limit_exceeded");
  EXPECT_TRUE(err["param"].is_null());
  EXPECT_EQ(header_of(oa, "x-request-id").size(), 4u + 32u);
  const auto none = faultline::llm_answer(LlmPreset::rate_limit, LlmProvider::openai, 0, 1, now);
  EXPECT_EQ(header_of(none, "retry-after"), "<none>") << "retry_after 0: no header, the SDK backs off itself";
}

TEST(LlmAnswer, OpenAiOverloadedAndGatewayPages) {
  const auto o = faultline::llm_answer(LlmPreset::overloaded, LlmProvider::openai, 1, 7, 0);
  EXPECT_EQ(o.status, 503);
  EXPECT_EQ(nlohmann::json::parse(o.body)["error"]["code"], "server_is_overloaded");
  for (auto p : {LlmProvider::anthropic, LlmProvider::openai}) {
    const auto bg = faultline::llm_answer(LlmPreset::bad_gateway, p, 1, 7, 0);
    EXPECT_EQ(bg.status, 502);
    EXPECT_NE(bg.body.find("<title>502 Bad Gateway</title>"), std::string::npos);
    EXPECT_EQ(header_of(bg, "Content-Type"), "text/html");
    EXPECT_EQ(faultline::llm_answer(LlmPreset::timeout, p, 1, 7, 0).status, 504);
  }
}

TEST(LlmAnswer, ProviderFromHostHeaderOrPath) {
  using faultline::infer_llm_provider;
  EXPECT_EQ(infer_llm_provider("api.anthropic.com", "/v1/x", false), LlmProvider::anthropic);
  EXPECT_EQ(infer_llm_provider("api.openai.com:443", "/v1/messages", false), LlmProvider::openai);
  EXPECT_EQ(infer_llm_provider("127.0.0.1:8080", "/v1/chat/completions", true), LlmProvider::anthropic);
  EXPECT_EQ(infer_llm_provider("127.0.0.1:8080", "/v1/messages", false), LlmProvider::anthropic);
  EXPECT_EQ(infer_llm_provider("127.0.0.1:8080", "/v1/chat/completions", false), LlmProvider::openai);
}

TEST(HttpResponse, ComposesLengthCloseAndNoBodyCases) {
  EXPECT_EQ(faultline::compose_http_response(503, {{"X-A", "1"}}, "down", true),
            "HTTP/1.1 503 Service Unavailable\r\nX-A: 1\r\nContent-Length: 4\r\n\r\ndown");
  EXPECT_EQ(faultline::compose_http_response(204, {}, "", false),
            "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(faultline::compose_http_response(200, {}, "abc", true, true),
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n");
}

}  // namespace
