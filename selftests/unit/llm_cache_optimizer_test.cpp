// --optimize-cache on Messages bodies: tools by name, breakpoints on the last
// tool and the system prompt's end within the limit of 4, nothing else changed.
#include "userspace/guard/llm_cache_optimizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace faultline {
namespace {

using Json = nlohmann::ordered_json;

const Json kEphemeral = Json{{"type", "ephemeral"}};

TEST(LlmCacheOptimizer, SortsToolsAndPlacesBothBreakpointsKeepingEverythingElse) {
  const std::string body =
      R"({"model":"claude-x","max_tokens":10,"system":"be brief \u00e9","tools":[{"name":"b","input_schema":{}},)"
      R"({"name":"a","description":"A","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}],)"
      R"("temperature":0.25})";
  const CacheOptimization o = optimize_anthropic_cache(body);
  ASSERT_EQ(o.changes.size(), 3u) << o.skipped;
  EXPECT_EQ(o.changes[0], "tools ordered by name");
  EXPECT_EQ(o.changes[1], "cache_control on the last tool (b)");
  EXPECT_EQ(o.changes[2], "cache_control on the system prompt's end");
  const Json j = Json::parse(o.body);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"model", "max_tokens", "system", "tools", "messages", "temperature"}));
  EXPECT_EQ(j["tools"][0], Json::parse(R"({"name":"a","description":"A","input_schema":{"type":"object"}})"));
  EXPECT_EQ(j["tools"][1]["name"], "b");
  EXPECT_EQ(j["tools"][1]["cache_control"], kEphemeral);
  EXPECT_EQ(j["system"], Json::parse(R"([{"type":"text","text":"be brief é","cache_control":{"type":"ephemeral"}}])"));
  EXPECT_EQ(j["messages"], Json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_EQ(j["temperature"], 0.25);
}

TEST(LlmCacheOptimizer, AtMostFourBreakpointsCountingThoseAlreadyInTheBody) {
  // Three in the messages already: only the tools' is added (it comes first).
  const std::string three =
      R"({"system":[{"type":"text","text":"s"}],"tools":[{"name":"a"}],"messages":[{"role":"user","content":[)"
      R"({"type":"text","text":"1","cache_control":{"type":"ephemeral"}},)"
      R"({"type":"text","text":"2","cache_control":{"type":"ephemeral"}},)"
      R"({"type":"text","text":"3","cache_control":{"type":"ephemeral"}}]}]})";
  CacheOptimization o = optimize_anthropic_cache(three);
  ASSERT_EQ(o.changes, (std::vector<std::string>{"cache_control on the last tool (a)"}));
  Json j = Json::parse(o.body);
  EXPECT_EQ(j["tools"][0]["cache_control"], kEphemeral);
  EXPECT_FALSE(j["system"][0].contains("cache_control"));

  // Four already: nothing is added, the body is not rewritten.
  Json four = Json::parse(three);
  four["messages"][0]["content"][0]["text"] = "one";
  four["system"][0]["cache_control"] = kEphemeral;
  o = optimize_anthropic_cache(four.dump());
  EXPECT_TRUE(o.changes.empty());
  EXPECT_TRUE(o.body.empty());
}

TEST(LlmCacheOptimizer, ABodyThatNeedsNothingIsLeftAsItIs) {
  for (const char* body : {
           R"({"model":"m","messages":[]})",
           R"({"tools":[{"name":"a"},{"name":"b","cache_control":{"type":"ephemeral"}}],)"
           R"("system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]})",
           R"({"system":"","messages":[]})",
       }) {
    const CacheOptimization o = optimize_anthropic_cache(body);
    EXPECT_TRUE(o.changes.empty()) << body << ": " << o.changes.front();
    EXPECT_TRUE(o.body.empty()) << body;
    EXPECT_EQ(o.skipped, "") << body;
  }
}

TEST(LlmCacheOptimizer, AToolBreakpointTheClientPlacedIsKeptAndNoneAdded) {
  const CacheOptimization o =
      optimize_anthropic_cache(R"({"tools":[{"name":"b","cache_control":{"type":"ephemeral"}},{"name":"a"}]})");
  ASSERT_EQ(o.changes, (std::vector<std::string>{"tools ordered by name"}));
  const Json j = Json::parse(o.body);
  EXPECT_EQ(j["tools"][1]["name"], "b");
  EXPECT_EQ(j["tools"][1]["cache_control"], kEphemeral);
  EXPECT_FALSE(j["tools"][0].contains("cache_control"));
}

TEST(LlmCacheOptimizer, WhatItDoesNotUnderstandIsSkippedWithTheReason) {
  EXPECT_EQ(optimize_anthropic_cache("not json").skipped, "not a JSON object");
  EXPECT_EQ(optimize_anthropic_cache("[1,2]").skipped, "not a JSON object");
  EXPECT_EQ(optimize_anthropic_cache("{\"a\":\"\xff\"}").skipped, "not a JSON object");  // invalid UTF-8
  // Tools it cannot name are left in their order; the system prompt still gets its breakpoint.
  const CacheOptimization o = optimize_anthropic_cache(R"({"tools":[{"name":"b"},{"type":"x"}],"system":"s"})");
  EXPECT_EQ(o.skipped, "tools: an entry without a string name");
  ASSERT_EQ(o.changes, (std::vector<std::string>{"cache_control on the system prompt's end"}));
  EXPECT_EQ(Json::parse(o.body)["tools"], Json::parse(R"([{"name":"b"},{"type":"x"}])"));
}

TEST(LlmCacheOptimizer, ModeWords) {
  EXPECT_EQ(parse_cache_optimize_mode("off"), CacheOptimizeMode::off);
  EXPECT_EQ(parse_cache_optimize_mode("monitor"), CacheOptimizeMode::monitor);
  EXPECT_EQ(parse_cache_optimize_mode("enforce"), CacheOptimizeMode::enforce);
  EXPECT_FALSE(parse_cache_optimize_mode("Enforce"));
  EXPECT_FALSE(parse_cache_optimize_mode(""));
  EXPECT_EQ(cache_optimize_mode_name(CacheOptimizeMode::monitor), "monitor");
}

}  // namespace
}  // namespace faultline
