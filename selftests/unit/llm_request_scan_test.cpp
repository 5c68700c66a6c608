// The streaming scan of LLM request bodies: facts whatever the field order and
// the chunking, strings and nesting skipped in bounded memory, bad JSON
// unparseable; and the rewrite (--route-model, include_usage injection).
#include "userspace/guard/llm_request_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace faultline {
namespace llm_scan_test {

struct Scanned {
  LlmScanState state = LlmScanState::scanning;
  LlmRequestFacts facts;
  std::string why;
};

Scanned scan_in_chunks(std::string_view body, size_t chunk) {
  LlmRequestScanner s;
  for (size_t at = 0; at < body.size(); at += chunk) (void)s.feed(body.substr(at, chunk));
  (void)s.finish();
  return Scanned{s.state(), s.facts(), std::string(s.why_unparseable())};
}

void expect_same(const LlmRequestFacts& a, const LlmRequestFacts& b, const std::string& ctx) {
  EXPECT_EQ(a.model, b.model) << ctx;
  EXPECT_EQ(a.stream, b.stream) << ctx;
  EXPECT_EQ(a.max_tokens, b.max_tokens) << ctx;
  EXPECT_EQ(a.stream_options_present, b.stream_options_present) << ctx;
}

TEST(LlmRequestScan, EveryFieldOrderAndChunking) {
  std::vector<std::string> members = {R"("model":"claude-sonnet-4-5")", R"("stream":true)", R"("max_tokens":1024)",
                                      R"("messages":[{"role":"user","content":"say \"model\": {\"max_tokens\": 9}"}])"};
  std::sort(members.begin(), members.end());
  int orders = 0;
  do {
    std::string body = "{";
    for (size_t i = 0; i < members.size(); ++i) body += (i ? ",\n  " : "") + members[i];
    body += "}";
    for (size_t chunk : {size_t{1}, size_t{2}, size_t{7}, body.size()}) {
      const Scanned s = scan_in_chunks(body, chunk);
      const std::string ctx = body + " in chunks of " + std::to_string(chunk);
      ASSERT_EQ(s.state, LlmScanState::complete) << ctx << ": " << s.why;
      EXPECT_EQ(s.facts.model, "claude-sonnet-4-5") << ctx;
      EXPECT_EQ(s.facts.stream, true) << ctx;
      EXPECT_EQ(s.facts.max_tokens, 1024u) << ctx;
    }
    ++orders;
  } while (std::next_permutation(members.begin(), members.end()));
  EXPECT_EQ(orders, 24);
}

TEST(LlmRequestScan, CompleteAsSoonAsEveryFactIsSeen) {
  LlmRequestScanner s;
  EXPECT_EQ(s.feed(R"({"model":"gpt-4o","stream":false,"max_completion_tokens":50,"messages":[{"content":"long)"),
            LlmScanState::complete);
  EXPECT_FALSE(s.object_ended());
  EXPECT_EQ(s.facts().stream, false);
  // Later bytes are still checked: a conflicting duplicate is unparseable.
  EXPECT_EQ(s.feed(R"("}],"model":"gpt-4o-mini"})"), LlmScanState::unparseable);
  EXPECT_EQ(s.why_unparseable(), "two different top-level model values");
}

TEST(LlmRequestScan, AbsentFactsCompleteAtTheObjectsEnd) {
  LlmRequestScanner s;
  EXPECT_EQ(s.feed(R"({"model":"gpt-4o","messages":[])"), LlmScanState::scanning);
  EXPECT_EQ(s.feed("}"), LlmScanState::complete);
  EXPECT_EQ(s.finish(), LlmScanState::complete);
  EXPECT_EQ(s.facts().model, "gpt-4o");
  EXPECT_FALSE(s.facts().stream.has_value());
  EXPECT_FALSE(s.facts().max_tokens.has_value());
  // null is what the providers take as absent.
  const Scanned n = scan_in_chunks(R"({"model":"m","stream":null,"max_tokens":null})", 3);
  EXPECT_EQ(n.state, LlmScanState::complete);
  EXPECT_FALSE(n.facts.stream.has_value());
  EXPECT_FALSE(n.facts.max_tokens.has_value());
}

// A prompt of 8 MiB (escapes, nesting, unicode) before the model: scanned at
// 1-byte and 64 KiB chunks, the scanner's memory stays under 1 KiB.
TEST(LlmRequestScan, HugePromptBeforeModelInBoundedMemory) {
  std::string prompt;
  const std::string piece = R"(lorem \"ipsum\" \\ {\"model\":\"x\"} \u00e9\ud83d\ude00 [1,2] )";
  while (prompt.size() < 8u * 1024 * 1024) prompt += piece;
  const std::string body = R"({"messages":[{"role":"user","content":[{"type":"text","text":")" + prompt +
                           R"("}]}],"metadata":{"user_id":"u"},"model":"claude-opus-4-1","max_tokens":32000})";
  for (size_t chunk : {size_t{1}, size_t{64 * 1024}}) {
    LlmRequestScanner s;
    size_t peak = 0;
    bool bad = false;
    for (size_t at = 0; at < body.size(); at += chunk) {
      bad |= s.feed(std::string_view(body).substr(at, chunk)) == LlmScanState::unparseable;
      if (chunk > 1 || at % 4096 == 0) peak = std::max(peak, s.state_bytes());
    }
    ASSERT_FALSE(bad) << s.why_unparseable();
    ASSERT_EQ(s.finish(), LlmScanState::complete) << s.why_unparseable();
    peak = std::max(peak, s.state_bytes());
    EXPECT_LT(peak, 1024u) << "chunk " << chunk;
    EXPECT_EQ(s.facts().model, "claude-opus-4-1");
    EXPECT_EQ(s.facts().max_tokens, 32000u);
  }
}

TEST(LlmRequestScan, KeysAndTheModelAreReadAsAJsonDecoderReadsThem) {
  // An escaped quote makes another key: "mo\"del" is not model.
  Scanned s = scan_in_chunks(R"({"mo\"del":"evil","model":"good"})", 1);
  EXPECT_EQ(s.facts.model, "good");
  s = scan_in_chunks(R"({"mo\"del":"evil"})", 1);
  EXPECT_EQ(s.state, LlmScanState::complete);
  EXPECT_FALSE(s.facts.model.has_value());
  // An escaped letter is the same key to the provider, so to the guard too.
  s = scan_in_chunks(R"({"mod\u0065l":"claude-opus-4","max_\u0074okens":9})", 1);
  EXPECT_EQ(s.facts.model, "claude-opus-4");
  EXPECT_EQ(s.facts.max_tokens, 9u);
  // The model's escapes are decoded (surrogate pairs to UTF-8).
  s = scan_in_chunks(R"({"model":"cl\u0061ude\/x \ud83d\ude00\t"})", 2);
  EXPECT_EQ(s.facts.model, "claude/x \xF0\x9F\x98\x80\t");
}

TEST(LlmRequestScan, NestedFactKeysAreIgnored) {
  const std::string body =
      R"({"messages":[{"model":"evil","stream":"x","max_tokens":1e9}],"metadata":{"model":{"max_tokens":[1]}},)"
      R"("tools":[[[{"model":"deep"}]]],"model":"m","stream_options":{"include_usage":false}})";
  const Scanned s = scan_in_chunks(body, 1);
  ASSERT_EQ(s.state, LlmScanState::complete) << s.why;
  EXPECT_EQ(s.facts.model, "m");
  EXPECT_FALSE(s.facts.stream.has_value());
  EXPECT_FALSE(s.facts.max_tokens.has_value());
  EXPECT_TRUE(s.facts.stream_options_present);
}

TEST(LlmRequestScan, MaxTokensFromAnyOfItsNamesTheLargestWins) {
  EXPECT_EQ(scan_in_chunks(R"({"max_output_tokens":300})", 1).facts.max_tokens, 300u);
  EXPECT_EQ(scan_in_chunks(R"({"max_tokens":10,"max_completion_tokens":700})", 1).facts.max_tokens, 700u);
  EXPECT_EQ(scan_in_chunks(R"({"max_tokens":100.0})", 1).facts.max_tokens, 100u);
  EXPECT_EQ(scan_in_chunks(R"({"max_tokens":1.5e3})", 2).facts.max_tokens, 1500u);
  EXPECT_EQ(scan_in_chunks(R"({"max_tokens":99999999999999999999999})", 3).facts.max_tokens, UINT64_MAX);
  EXPECT_EQ(scan_in_chunks(R"({"max_tokens":0})", 1).facts.max_tokens, 0u);
}

TEST(LlmRequestScan, BadJsonAndWrongTypesAreUnparseable) {
  const std::vector<std::string> bad = {
      "",
      "   ",
      "[1,2]",
      R"("model")",
      R"({"model":"m")",
      R"({"model":"m"} x)",
      R"({"model":"m",})",
      R"({"model" "m"})",
      R"({"model":"m\q"})",
      "{\"model\":\"a\nb\"}",
      R"({"model":"\u12G4"})",
      R"({"model":7})",
      R"({"model":["m"]})",
      R"({"stream":"yes"})",
      R"({"stream":1})",
      R"({"max_tokens":"100"})",
      R"({"max_tokens":-1})",
      R"({"max_tokens":true})",
      R"({"x":01})",
      R"({"x":1.})",
      R"({"x":-})",
      R"({"x":tru})",
      R"({"x":nul,"model":"m"})",
      R"({"x":[1,]})",
      R"({"x":{]})",
      R"({"stream":true,"stream":false})",
      std::string(300, '[') + std::string(300, ']'),
      R"({"model":")" + std::string(300, 'm') + R"("})",
  };
  for (const auto& body : bad) {
    for (size_t chunk : {size_t{1}, std::max<size_t>(body.size(), 1)}) {
      const Scanned s = scan_in_chunks(body, chunk);
      EXPECT_EQ(s.state, LlmScanState::unparseable) << body.substr(0, 60) << " chunk " << chunk;
      EXPECT_FALSE(s.why.empty()) << body.substr(0, 60);
    }
  }
  // Deep nesting within the limit is fine.
  const Scanned deep =
      scan_in_chunks("{\"x\":" + std::string(200, '[') + std::string(200, ']') + ",\"model\":\"m\"}", 5);
  EXPECT_EQ(deep.state, LlmScanState::complete) << deep.why;
  EXPECT_EQ(deep.facts.model, "m");
  // A duplicate with the same value is not a conflict.
  EXPECT_EQ(scan_in_chunks(R"({"model":"m","model":"m"})", 1).state, LlmScanState::complete);
}

TEST(LlmRequestScan, EndpointsByPath) {
  EXPECT_EQ(llm_endpoint_for_target("/v1/messages"), LlmEndpoint::AnthropicMessages);
  EXPECT_EQ(llm_endpoint_for_target("/v1/messages?beta=true"), LlmEndpoint::AnthropicMessages);
  EXPECT_EQ(llm_endpoint_for_target("/v1/chat/completions"), LlmEndpoint::OpenAIChat);
  EXPECT_EQ(llm_endpoint_for_target("/v1/responses"), LlmEndpoint::OpenAIResponses);
  EXPECT_EQ(llm_endpoint_for_target("/v1/messages/count_tokens"), LlmEndpoint::None);
  EXPECT_EQ(llm_endpoint_for_target("/v1/models"), LlmEndpoint::None);
}

std::string rewrite_in_chunks(LlmRequestRewriter& r, std::string_view body, size_t chunk) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += chunk) out += r.feed(body.substr(at, chunk));
  out += r.finish();
  return out;
}

TEST(LlmRequestRewrite, RoutesTheTopLevelModelOnly) {
  const std::string body =
      R"({"messages":[{"role":"user","content":"use \"model\":\"claude-opus-4-1\""}],"model" : "claude-opus-4-1","max_tokens":10})";
  const std::string want =
      R"({"messages":[{"role":"user","content":"use \"model\":\"claude-opus-4-1\""}],"model" : "claude-sonnet-4-5","max_tokens":10})";
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{50}, body.size()}) {
    LlmRequestRewriter r(LlmEndpoint::AnthropicMessages, {{"gpt-x", "no"}, {"claude-opus-4-1", "claude-sonnet-4-5"}},
                         true);
    EXPECT_EQ(rewrite_in_chunks(r, body, chunk), want) << chunk;
    EXPECT_EQ(r.routed_from(), "claude-opus-4-1");
    EXPECT_FALSE(LlmRequestRewriter(LlmEndpoint::OpenAIChat, {}, true).routed_from().has_value());
    EXPECT_EQ(r.length_delta(), static_cast<int64_t>(want.size()) - static_cast<int64_t>(body.size()));
    EXPECT_FALSE(r.usage_injected());  // not an OpenAI chat stream
  }
}

TEST(LlmRequestRewrite, EscapedModelMatchesAndTheNewOneIsEscaped) {
  LlmRequestRewriter r(LlmEndpoint::OpenAIChat, {{"gpt-4o", "my \"model\""}}, false);
  EXPECT_EQ(rewrite_in_chunks(r, R"({"model":"gpt\u002d4o"})", 2), R"({"model":"my \"model\""})");
}

TEST(LlmRequestRewrite, UntouchedWithoutARouteOrOnBadJson) {
  const std::vector<std::string> bodies = {R"({"model":"gpt-4o","messages":[]})", R"({"model":"gpt-4o")",
                                           R"({"model":"gpt-4o" garbage)", "not json", R"({"model":"gpt-)"};
  for (const auto& body : bodies) {
    for (size_t chunk : {size_t{1}, body.size()}) {
      LlmRequestRewriter r(LlmEndpoint::OpenAIChat, {{"gpt-4", "gpt-4o-mini"}}, true);
      EXPECT_EQ(rewrite_in_chunks(r, body, chunk), body) << body;
      EXPECT_EQ(r.length_delta(), 0);
    }
  }
}

TEST(LlmRequestRewrite, IncludeUsageInjectedIntoOpenAIChatStreams) {
  const std::string body = R"({"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]} )";
  for (size_t chunk : {size_t{1}, size_t{4}, body.size()}) {
    LlmRequestRewriter r(LlmEndpoint::OpenAIChat, {{"gpt-4o", "gpt-4o-mini"}}, true);
    const std::string out = rewrite_in_chunks(r, body, chunk);
    EXPECT_EQ(
        out,
        R"({"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}} )");
    EXPECT_TRUE(r.usage_injected());
    EXPECT_EQ(r.length_delta(), static_cast<int64_t>(out.size() - body.size()));
    const auto j = nlohmann::json::parse(out);
    EXPECT_EQ(j["stream_options"]["include_usage"], true);
  }
  // Not when the client set stream_options itself, nor without stream, nor when not asked.
  for (const std::string& b : {std::string(R"({"model":"m","stream":true,"stream_options":{"include_usage":false}})"),
                               std::string(R"({"model":"m","stream":false})"), std::string(R"({"model":"m"})")}) {
    LlmRequestRewriter r(LlmEndpoint::OpenAIChat, {}, true);
    EXPECT_EQ(rewrite_in_chunks(r, b, 1), b);
    EXPECT_FALSE(r.usage_injected());
  }
  LlmRequestRewriter off(LlmEndpoint::OpenAIChat, {}, false);
  EXPECT_EQ(rewrite_in_chunks(off, body, 1), body);
}

TEST(LlmRequestRewrite, ParseRoute) {
  auto r = parse_model_route("claude-opus-4-1=claude-sonnet-4-5");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->from, "claude-opus-4-1");
  EXPECT_EQ(r->to, "claude-sonnet-4-5");
  for (const char* bad : {"", "=x", "x=", "nothing"}) {
    auto e = parse_model_route(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_TRUE(e.error().bad_input);
  }
}

}  // namespace llm_scan_test
}  // namespace faultline
