// The guard's denials: complete HTTP/1.1 responses whose bodies parse as JSON in
// the format the client expects, with the status and headers its SDK obeys.
#include "userspace/guard/guard_answer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace faultline {
namespace {

struct ParsedResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  nlohmann::json body;
};

ParsedResponse parse_response(const std::string& bytes) {
  ParsedResponse r;
  const size_t end = bytes.find("\r\n\r\n");
  EXPECT_NE(end, std::string::npos) << bytes;
  EXPECT_EQ(bytes.rfind("HTTP/1.1 ", 0), 0u) << bytes;
  r.status = std::stoi(bytes.substr(9, 3));
  size_t at = bytes.find("\r\n") + 2;
  while (at < end) {
    const size_t nl = bytes.find("\r\n", at);
    const std::string line = bytes.substr(at, nl - at);
    const size_t colon = line.find(": ");
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(colon + 2);
    at = nl + 2;
  }
  const std::string body = bytes.substr(end + 4);
  EXPECT_EQ(std::to_string(body.size()), r.headers["content-length"]);
  r.body = nlohmann::json::parse(body, nullptr, false);
  EXPECT_FALSE(r.body.is_discarded()) << body;
  return r;
}

Denial denial(DenialCause cause) { return Denial{cause, "no-\"opus\"", "model not allowed: \"opus\"\n", "act_42"}; }

TEST(GuardAnswer, PlainHostGets403Json) {
  const ParsedResponse r = parse_response(denial_response(denial(DenialCause::Policy), DenialFormat::Plain, true));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.count("connection"), 0u);
  EXPECT_EQ(r.body["error"], "denied by policy");
  EXPECT_EQ(r.body["rule"], "no-\"opus\"");
  EXPECT_EQ(r.body["reason"], "model not allowed: \"opus\"\n");
  EXPECT_EQ(r.body["request_id"], "act_42");
  EXPECT_EQ(r.body.size(), 4u);
}

TEST(GuardAnswer, AnthropicPolicyAndBudget) {
  ParsedResponse r = parse_response(denial_response(denial(DenialCause::Policy), DenialFormat::Anthropic, false));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.headers.at("x-should-retry"), "false");
  EXPECT_EQ(r.headers.at("request-id"), "act_42");
  EXPECT_EQ(r.headers.at("connection"), "close");
  EXPECT_EQ(r.body["type"], "error");
  EXPECT_EQ(r.body["error"]["type"], "permission_error");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("no-\"opus\""), std::string::npos);
  EXPECT_EQ(r.body["request_id"], "act_42");

  r = parse_response(denial_response(denial(DenialCause::Budget), DenialFormat::Anthropic, true));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers.at("x-should-retry"), "false");
  EXPECT_EQ(r.headers.count("retry-after"), 0u);
  EXPECT_EQ(r.body["error"]["type"], "rate_limit_error");
}

TEST(GuardAnswer, OpenAiPolicyAndBudget) {
  ParsedResponse r = parse_response(denial_response(denial(DenialCause::Policy), DenialFormat::OpenAI, true));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.headers.at("x-should-retry"), "false");
  EXPECT_EQ(r.headers.at("x-request-id"), "act_42");
  EXPECT_EQ(r.body["error"]["type"], "permission_error");
  EXPECT_EQ(r.body["error"]["code"], "policy_denied");
  EXPECT_TRUE(r.body["error"]["param"].is_null());
  EXPECT_TRUE(r.body["error"]["message"].is_string());

  r = parse_response(denial_response(denial(DenialCause::Budget), DenialFormat::OpenAI, true));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers.at("x-should-retry"), "false");
  EXPECT_EQ(r.body["error"]["type"], "insufficient_quota");
  EXPECT_EQ(r.body["error"]["code"], "insufficient_quota");
}

TEST(GuardAnswer, ProviderFormat) {
  EXPECT_EQ(denial_format_for(LlmProvider::anthropic), DenialFormat::Anthropic);
  EXPECT_EQ(denial_format_for(LlmProvider::openai), DenialFormat::OpenAI);
  EXPECT_EQ(denial_format_for(infer_llm_provider("api.anthropic.com", "/v1/messages", false)), DenialFormat::Anthropic);
}

}  // namespace
}  // namespace faultline
