// The toxic JSON of Toxiproxy: defaults, every type's attributes, and a bad-input
// table whose errors name the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "userspace/proxy/toxic.h"

namespace {

using faultline::Toxic;
using faultline::toxic_from_json;
using json = nlohmann::json;

TEST(ToxicJson, DefaultsAreToxiproxys) {
  auto t = toxic_from_json(json::parse(R"({"type":"latency","attributes":{"latency":50}})"));
  ASSERT_TRUE(t.ok()) << t.error().describe();
  EXPECT_EQ(t->name, "latency_downstream");
  EXPECT_EQ(t->stream, faultline::Stream::downstream);
  EXPECT_EQ(t->toxicity, 1.0);
  EXPECT_EQ(std::get<faultline::LatencyToxic>(t->attributes).latency_ms, 50);
  EXPECT_EQ(std::get<faultline::LatencyToxic>(t->attributes).jitter_ms, 0);
  auto up = toxic_from_json(json::parse(R"({"type":"noop","stream":"upstream"})"));
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->name, "noop_upstream");
}

TEST(ToxicJson, EveryTypeRoundTripsWithItsAttributeNames) {
  const char* bodies[] = {
      R"({"name":"a","type":"latency","stream":"upstream","toxicity":0.5,"attributes":{"latency":100,"jitter":10}})",
      R"({"name":"b","type":"bandwidth","stream":"downstream","toxicity":1.0,"attributes":{"rate":500}})",
      R"({"name":"c","type":"slow_close","stream":"downstream","toxicity":1.0,"attributes":{"delay":300}})",
      R"({"name":"d","type":"timeout","stream":"upstream","toxicity":1.0,"attributes":{"timeout":0}})",
      R"({"name":"e","type":"reset_peer","stream":"downstream","toxicity":1.0,"attributes":{"timeout":250}})",
      R"({"name":"f","type":"slicer","stream":"downstream","toxicity":1.0,"attributes":{"average_size":100,"size_variation":20,"delay":1000}})",
      R"({"name":"g","type":"limit_data","stream":"downstream","toxicity":1.0,"attributes":{"bytes":12345}})",
      R"({"name":"h","type":"noop","stream":"downstream","toxicity":0.25,"attributes":{}})",
  };
  for (const char* body : bodies) {
    auto t = toxic_from_json(json::parse(body));
    ASSERT_TRUE(t.ok()) << body << ": " << t.error().describe();
    EXPECT_EQ(faultline::toxic_to_json(*t), json::parse(body)) << body;
  }
}

TEST(ToxicJson, BadInputNamesTheField) {
  struct Case {
    const char* body;
    const char* field;  // the error must name it
  };
  const Case cases[] = {
      {R"({"attributes":{"latency":1}})", "\"type\": missing"},
      {R"({"type":"lag"})", "\"type\": unknown type \"lag\""},
      {R"({"type":7})", "\"type\": must be a string"},
      {R"({"type":"latency","stream":"sideways"})", "\"stream\": unknown stream \"sideways\""},
      {R"({"type":"latency","stream":1})", "\"stream\": must be a string"},
      {R"({"type":"latency","toxicity":"all"})", "\"toxicity\": must be a number"},
      {R"({"type":"latency","attributes":{"latency":1.5}})", "\"attributes.latency\": must be an integer"},
      {R"({"type":"latency","attributes":{"latency":"50ms"}})", "\"attributes.latency\": must be an integer"},
      {R"({"type":"noop","attributes":[]})", "\"attributes\": must be an object"},
      {R"({"type":"noop","name":3})", "\"name\": must be a string"},
  };
  for (const auto& c : cases) {
    auto t = toxic_from_json(json::parse(c.body));
    ASSERT_FALSE(t.ok()) << c.body << " was accepted";
    EXPECT_TRUE(t.error().bad_input) << c.body;
    EXPECT_EQ(t.error().err, EINVAL) << c.body;
    EXPECT_NE(t.error().message.find(c.field), std::string::npos)
        << c.body << ": expected the error to name " << c.field << ", got: " << t.error().message;
  }
  EXPECT_FALSE(toxic_from_json(json::parse("[1,2]")).ok());
}

TEST(ToxicJson, MergeKeepsWhatThePatchLeavesOut) {
  auto t = toxic_from_json(json::parse(R"({"name":"lat","type":"latency","attributes":{"latency":100,"jitter":10}})"));
  ASSERT_TRUE(t.ok());
  auto m = faultline::toxic_merged(*t, json::parse(R"({"attributes":{"latency":200},"toxicity":0.5})"));
  ASSERT_TRUE(m.ok()) << m.error().describe();
  EXPECT_EQ(m->name, "lat");
  EXPECT_EQ(m->toxicity, 0.5);
  EXPECT_EQ(std::get<faultline::LatencyToxic>(m->attributes).latency_ms, 200);
  EXPECT_EQ(std::get<faultline::LatencyToxic>(m->attributes).jitter_ms, 10);
  // As Toxiproxy's update: name, type and stream are ignored, not refused.
  auto same = faultline::toxic_merged(*t, json::parse(R"({"type":"bandwidth","name":"x","stream":"upstream"})"));
  ASSERT_TRUE(same.ok()) << same.error().describe();
  EXPECT_EQ(same->name, "lat");
  EXPECT_EQ(same->type(), "latency");
  EXPECT_EQ(same->stream, faultline::Stream::downstream);
  EXPECT_FALSE(faultline::toxic_merged(*t, json::parse(R"({"attributes":{"latency":"x"}})")).ok());
}

// What Toxiproxy's decoder takes is taken: negative and out-of-range values
// (the relay reads them safely), unknown members, null, any stream case, a
// slicer whose variation reaches its average. The strict check (faultctl's)
// still refuses the values.
TEST(ToxicJson, AcceptsWhatToxiproxyAccepts) {
  const char* bodies[] = {
      R"({"type":"latency","toxicity":1.5})",
      R"({"type":"latency","toxicity":-0.1})",
      R"({"type":"latency","attributes":{"latency":-5,"jitter":-1}})",
      R"({"type":"latency","attributes":{"rate":5}})",
      R"({"type":"bandwidth","attributes":{"rate":-1}})",
      R"({"type":"timeout","attributes":{"timeout":-1}})",
      R"({"type":"limit_data","attributes":{"bytes":-1}})",
      R"({"type":"slicer","attributes":{"average_size":0}})",
      R"({"type":"slicer","attributes":{"average_size":1000,"size_variation":1000,"delay":1000}})",
      R"({"type":"slicer","attributes":{"average_size":10,"size_variation":500}})",
      R"({"type":"noop","color":"red","name":null,"attributes":{"x":1}})",
      R"({"type":"latency","stream":"UpStream","attributes":{"latency":null}})",
  };
  for (const char* body : bodies) {
    auto t = toxic_from_json(json::parse(body));
    ASSERT_TRUE(t.ok()) << body << ": " << t.error().describe();
  }
  auto up = toxic_from_json(json::parse(R"({"type":"latency","stream":"UpStream"})"));
  EXPECT_EQ(up->stream, faultline::Stream::upstream);
  EXPECT_FALSE(faultline::validate_toxic_strict(*toxic_from_json(json::parse(bodies[2]))).ok());
  EXPECT_FALSE(faultline::validate_toxic_strict(*toxic_from_json(json::parse(bodies[0]))).ok());
  EXPECT_TRUE(faultline::validate_toxic_strict(*toxic_from_json(json::parse(bodies[8]))).ok());
}

// Faultline's extensions: first_n on every type but noop, limit_time and
// slow_open. Shown only when asked for (first_n 0 is not shown, so a
// Toxiproxy client sees Toxiproxy's shape); their values are judged.
TEST(ToxicJson, ExtensionsRoundTripAndStayOutOfToxiproxysShape) {
  const char* bodies[] = {
      R"({"name":"a","type":"reset_peer","stream":"downstream","toxicity":1.0,"attributes":{"timeout":0,"first_n":3}})",
      R"({"name":"b","type":"latency","stream":"upstream","toxicity":1.0,"attributes":{"latency":10,"jitter":0,"first_n":1}})",
      R"({"name":"c","type":"limit_time","stream":"downstream","toxicity":1.0,"attributes":{"time":500}})",
      R"({"name":"d","type":"slow_open","stream":"upstream","toxicity":0.5,"attributes":{"delay":200,"first_n":2}})",
  };
  for (const char* body : bodies) {
    auto t = toxic_from_json(json::parse(body));
    ASSERT_TRUE(t.ok()) << body << ": " << t.error().describe();
    EXPECT_EQ(faultline::toxic_to_json(*t), json::parse(body)) << body;
  }
  auto plain = toxic_from_json(json::parse(R"({"type":"timeout","attributes":{"timeout":5,"first_n":0}})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(faultline::toxic_to_json(*plain)["attributes"], json::parse(R"({"timeout":5})"));
  EXPECT_EQ(faultline::first_n_of(plain->attributes), 0);
  auto n = toxic_from_json(json::parse(R"({"type":"limit_data","attributes":{"bytes":5,"first_n":7}})"));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(faultline::first_n_of(n->attributes), 7);
  // noop has no first_n: ignored, as any attribute a type does not have.
  auto noop = toxic_from_json(json::parse(R"({"type":"noop","attributes":{"first_n":2}})"));
  ASSERT_TRUE(noop.ok());
  EXPECT_EQ(faultline::toxic_to_json(*noop)["attributes"], json::object());
}

TEST(ToxicJson, ExtensionValuesAreJudged) {
  struct Case {
    const char* body;
    const char* field;
  };
  const Case cases[] = {
      {R"({"type":"reset_peer","attributes":{"first_n":-1}})", "\"attributes.first_n\": must not be negative, got -1"},
      {R"({"type":"latency","attributes":{"first_n":1.5}})", "\"attributes.first_n\": must be an integer"},
      {R"({"type":"timeout","attributes":{"first_n":"3"}})", "\"attributes.first_n\": must be an integer"},
      {R"({"type":"limit_time","attributes":{"time":-5}})", "\"attributes.time\": must not be negative, got -5"},
      {R"({"type":"limit_time","attributes":{"time":"1s"}})", "\"attributes.time\": must be an integer"},
      {R"({"type":"slow_open","attributes":{"delay":-1}})", "\"attributes.delay\": must not be negative, got -1"},
      {R"({"type":"slow_open","attributes":{"delay":0.5}})", "\"attributes.delay\": must be an integer"},
  };
  for (const auto& c : cases) {
    auto t = toxic_from_json(json::parse(c.body));
    ASSERT_FALSE(t.ok()) << c.body << " was accepted";
    EXPECT_TRUE(t.error().bad_input) << c.body;
    EXPECT_NE(t.error().message.find(c.field), std::string::npos)
        << c.body << ": expected the error to name " << c.field << ", got: " << t.error().message;
  }
  // An update is judged the same way.
  auto t = toxic_from_json(json::parse(R"({"type":"reset_peer","attributes":{"first_n":3}})"));
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(faultline::toxic_merged(*t, json::parse(R"({"attributes":{"first_n":-2}})")).ok());
  // A Toxiproxy attribute of an extension type's neighbour stays unjudged.
  EXPECT_TRUE(toxic_from_json(json::parse(R"({"type":"slow_close","attributes":{"delay":-1}})")).ok());
}

}  // namespace
