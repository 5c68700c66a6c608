// The proctor's reading of its model's answer (only a clear approve or deny
// decides; anything else leaves the request to a person), the request it
// sends, and its configuration from the environment.
#include "userspace/guard_runtime/guard_proctor.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

namespace faultline {
namespace {

std::string messages_answer(const std::string& text) {
  return nlohmann::json{{"type", "message"}, {"content", {{{"type", "text"}, {"text", text}}}}}.dump();
}

TEST(GuardProctor, OnlyAClearApproveOrDenyDecides) {
  auto r = read_proctor_answer(200, messages_answer(R"({"decision":"approve","reason":"docs"})"));
  EXPECT_EQ(r.decision, ProctorDecision::Approve);
  EXPECT_EQ(r.reason, "docs");
  r = read_proctor_answer(200, messages_answer("```json\n{\"decision\": \"deny\", \"reason\": \"exfil\"}\n```"));
  EXPECT_EQ(r.decision, ProctorDecision::Deny);
  EXPECT_EQ(r.reason, "exfil");
  const std::vector<std::pair<int, std::string>> escalate = {
      {200, messages_answer(R"({"decision":"escalate","reason":"unsure"})")},
      {200, messages_answer("Sure, looks fine!")},
      {200, messages_answer(R"({"decision":"Approve"})")},
      {200, messages_answer(R"({"verdict":"approve"})")},
      {200, messages_answer(R"({"decision":true})")},
      {200, "not json"},
      {200, R"({"content":"approve"})"},
      {500, messages_answer(R"({"decision":"approve"})")},
      {429, ""},
  };
  for (const auto& [status, body] : escalate) {
    const auto e = read_proctor_answer(status, body);
    EXPECT_EQ(e.decision, ProctorDecision::Escalate) << status << " " << body;
    EXPECT_FALSE(e.reason.empty()) << body;
  }
  EXPECT_EQ(read_proctor_answer(500, "").reason, "the proctor's model answered HTTP 500");
  const auto longer = read_proctor_answer(
      200, messages_answer(nlohmann::json{{"decision", "deny"}, {"reason", std::string(2000, 'x')}}.dump()));
  EXPECT_EQ(longer.reason.size(), 500u);
}

TEST(GuardProctor, TheRequestCarriesTheHeldRequestsFactsNotItsBody) {
  PendingApproval p;
  p.identity = "alice@laptop";
  p.method = "POST";
  p.host = "api.example.com:443";
  p.path = "/upload";
  p.rule = "uploads";
  p.reason = "uploads need a look";
  const auto body = nlohmann::json::parse(proctor_request_body(ProctorConfig{"http://x", "claude-haiku-4", "k"}, p));
  EXPECT_EQ(body["model"], "claude-haiku-4");
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_NE(body["system"].get<std::string>().find("escalate"), std::string::npos);
  const std::string asked = body["messages"][0]["content"].get<std::string>();
  for (const char* fact : {"alice@laptop", "api.example.com:443", "/upload", "uploads need a look"})
    EXPECT_NE(asked.find(fact), std::string::npos) << fact;
}

TEST(GuardProctor, TheEnvironmentConfiguresItOrIsRefusedNamingTheVariable) {
  for (const char* v : {"FAULTLINE_PROCTOR_API_KEY", "FAULTLINE_PROCTOR_MODEL", "FAULTLINE_PROCTOR_URL",
                        "FAULTLINE_PROCTOR_TIMEOUT_MS"})
    ::unsetenv(v);
  auto none = proctor_config_from_env();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ::setenv("FAULTLINE_PROCTOR_MODEL", "m", 1);
  auto keyless = proctor_config_from_env();
  ASSERT_FALSE(keyless.ok());
  EXPECT_NE(keyless.error().message.find("FAULTLINE_PROCTOR_API_KEY"), std::string::npos);
  ::setenv("FAULTLINE_PROCTOR_API_KEY", "k", 1);
  auto c = proctor_config_from_env();
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ((*c)->url, "https://api.anthropic.com/v1/messages");
  EXPECT_EQ((*c)->timeout.count(), 10'000);
  ::setenv("FAULTLINE_PROCTOR_TIMEOUT_MS", "50", 1);
  auto fast = proctor_config_from_env();
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.error().message.find("FAULTLINE_PROCTOR_TIMEOUT_MS"), std::string::npos);
  ::unsetenv("FAULTLINE_PROCTOR_TIMEOUT_MS");
  ::setenv("FAULTLINE_PROCTOR_URL", "ftp://x", 1);
  EXPECT_FALSE(proctor_config_from_env().ok());
  for (const char* v : {"FAULTLINE_PROCTOR_API_KEY", "FAULTLINE_PROCTOR_MODEL", "FAULTLINE_PROCTOR_URL"}) ::unsetenv(v);
}

}  // namespace
}  // namespace faultline
