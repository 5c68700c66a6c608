// HTTP toxics: the Toxiproxy envelope read into HTTP faults and shown back,
// Toxiproxy's partial update, and every bad attribute named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "userspace/proxy/http_toxic.h"

namespace {

using faultline::HttpFaultType;
using faultline::LlmPreset;

TEST(HttpToxicJson, EveryTypeRoundTrips) {
  const char* bodies[] = {
      R"({"name":"s","type":"http_status","stream":"downstream","toxicity":0.5,
          "attributes":{"status":503,"body":"down","content_type":"text/x","headers":{"X-A":"1"},"delay":5,
                        "host":"api.x","method":"POST","path":"/v1/*","match_headers":[{"name":"x-t","equals":"b"}],
                        "first_n":3,"attempts":2}})",
      R"({"type":"http_delay","stream":"upstream","attributes":{"delay":200}})",
      R"({"type":"http_reset"})",
      R"({"type":"http_truncate","attributes":{"bytes":10}})",
      R"({"type":"http_abort_stream","attributes":{"events":2}})",
      R"({"type":"llm_overloaded","attributes":{"provider":"anthropic"}})",
      R"({"type":"llm_rate_limit","attributes":{"retry_after":3}})",
      R"({"type":"llm_server_error"})",
      R"({"type":"llm_bad_gateway"})",
      R"({"type":"llm_timeout","attributes":{"hang":100}})",
      R"({"type":"llm_stream_cut","attributes":{"events":4}})",
  };
  for (const char* b : bodies) {
    auto f = faultline::http_toxic_from_json(nlohmann::json::parse(b));
    ASSERT_TRUE(f.ok()) << b << ": " << f.error().describe();
    ASSERT_TRUE(f->toxic.has_value());
    const nlohmann::json out = faultline::http_toxic_to_json(*f);
    auto again = faultline::http_toxic_from_json(out);
    ASSERT_TRUE(again.ok()) << out.dump() << ": " << again.error().describe();
    EXPECT_EQ(faultline::http_toxic_to_json(*again), out) << b;
  }
  EXPECT_EQ(faultline::http_toxic_types().size(), 11u);
}

TEST(HttpToxicJson, EnvelopeBecomesTheFault) {
  auto f = faultline::http_toxic_from_json(nlohmann::json::parse(
      R"({"type":"llm_rate_limit","toxicity":1.5,"attributes":{"path":"/v1/messages","first_n":2}})"));
  ASSERT_TRUE(f.ok()) << f.error().describe();
  EXPECT_EQ(f->name, "llm_rate_limit_downstream") << "Toxiproxy's default name";
  EXPECT_EQ(f->type, HttpFaultType::llm);
  EXPECT_EQ(f->preset, LlmPreset::rate_limit);
  EXPECT_EQ(f->percent, 100) << "a toxicity above 1 always applies";
  EXPECT_EQ(f->toxic->toxicity, 1.5) << "shown as given";
  EXPECT_EQ(f->match.path, "/v1/messages");
  EXPECT_EQ(f->first_n, 2);
  auto up = faultline::http_toxic_from_json(
      nlohmann::json::parse(R"({"type":"http_delay","stream":"UPSTREAM","toxicity":-1,"attributes":{"delay":5}})"));
  ASSERT_TRUE(up.ok()) << up.error().describe();
  EXPECT_EQ(up->where, faultline::DelayPoint::request) << "upstream: the request waits";
  EXPECT_EQ(up->percent, 0) << "a toxicity below 0 never applies";
  EXPECT_EQ(up->name, "http_delay_upstream");
  auto down =
      faultline::http_toxic_from_json(nlohmann::json::parse(R"({"type":"http_delay","attributes":{"delay":5}})"));
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->where, faultline::DelayPoint::response) << "downstream: the response waits";
}

TEST(HttpToxicJson, UpdateReplacesMemberByMemberAndKeepsTheRest) {
  auto f = faultline::http_toxic_from_json(nlohmann::json::parse(
      R"({"name":"s","type":"http_status","stream":"upstream","attributes":{"status":503,"path":"/a","first_n":1}})"));
  ASSERT_TRUE(f.ok());
  auto g = faultline::http_toxic_merged(
      *f, nlohmann::json::parse(R"({"name":"other","type":"http_reset","toxicity":0.25,"attributes":{"status":500}})"));
  ASSERT_TRUE(g.ok()) << g.error().describe();
  EXPECT_EQ(g->name, "s");
  EXPECT_EQ(g->toxic->type, "http_status");
  EXPECT_EQ(g->toxic->stream, faultline::Stream::upstream);
  EXPECT_EQ(g->status, 500);
  EXPECT_EQ(g->match.path, "/a");
  EXPECT_EQ(g->first_n, 1);
  EXPECT_EQ(g->percent, 25);
  auto bad = faultline::http_toxic_merged(*f, nlohmann::json::parse(R"({"attributes":{"status":42}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, R"(toxic: "attributes.status": must be 100..599, got 42)");
}

TEST(HttpToxicJson, BadAttributesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"http_status"})", R"(toxic: "attributes.status": missing (100..599))"},
      {R"({"type":"http_status","attributes":{"status":42}})",
       R"(toxic: "attributes.status": must be 100..599, got 42)"},
      {R"({"type":"http_status","attributes":{"status":503,"latency":5}})",
       R"(toxic: "attributes.latency": not an attribute of http_status (status, body, content_type, headers, delay, host, method, path, match_headers, first_n, attempts))"},
      {R"({"type":"http_reset","attributes":{"path":"payments"}})",
       R"(toxic: "attributes.path": must start with / (a prefix or a glob), got "payments")"},
      {R"({"type":"http_reset","attributes":{"method":"GE T"}})",
       R"(toxic: "attributes.method": not an HTTP method: GE T)"},
      {R"({"type":"http_reset","attributes":{"first_n":-1}})",
       R"(toxic: "attributes.first_n": must be 0..1000000000, got -1)"},
      {R"({"type":"http_reset","attributes":{"first_n":"two"}})",
       R"(toxic: "attributes.first_n": must be a number, got string)"},
      {R"({"type":"http_reset","attributes":{"attempts":1.5}})",
       R"(toxic: "attributes.attempts": must be a whole number, got 1.5)"},
      {R"({"type":"http_reset","attributes":{"match_headers":[{"name":"x"}]}})",
       R"(toxic: "attributes.match_headers[0]": needs exactly one of "equals" and "contains")"},
      {R"({"type":"http_delay"})", R"(toxic: "attributes.delay": missing (ms, > 0))"},
      {R"({"type":"llm_overloaded","attributes":{"provider":"acme"}})",
       R"(toxic: "attributes.provider": unknown provider "acme" (anthropic, openai; omitted: from the host))"},
      {R"({"type":"llm_overloaded","attributes":{"retry_after":3}})",
       R"(toxic: "attributes.retry_after": not an attribute of llm_overloaded (provider, host, method, path, match_headers, first_n, attempts))"},
      {R"({"type":"llm_timeout","attributes":{"hang":-5}})", R"(toxic: "attributes.hang": must be 0..3600000, got -5)"},
      {R"({"type":"http_reset","attributes":[]})", R"(toxic: "attributes": must be an object)"},
      {R"({"type":"http_reset","stream":"sideways"})",
       R"(toxic: "stream": unknown stream "sideways" (upstream or downstream))"},
      {R"({"type":"http_reset","name":"a/b"})", R"(toxic: "name": must be 1..128 characters without /)"},
  };
  for (const auto& [body, message] : cases) {
    auto f = faultline::http_toxic_from_json(nlohmann::json::parse(body));
    ASSERT_FALSE(f.ok()) << body;
    EXPECT_EQ(f.error().message, message) << body;
    EXPECT_TRUE(f.error().bad_input) << body;
  }
}

}  // namespace
