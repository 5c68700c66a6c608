// What the Prometheus guardrails read: /api/v1/query answers and burn-rate windows.
#include "userspace/guardrails/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>

#include "userspace/guardrails/burn_rate.h"

namespace faultline {
namespace {

std::string vector_of(const std::string& elements) {
  return R"({"status":"success","data":{"resultType":"vector","result":[)" + elements + "]}}";
}

TEST(PrometheusAnswer, AScalar) {
  auto s =
      parse_prometheus_answer(R"({"status":"success","data":{"resultType":"scalar","result":[1700000000.25,"0.5"]}})");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_DOUBLE_EQ(s->value, 0.5);
  EXPECT_DOUBLE_EQ(s->timestamp_s, 1700000000.25);
  EXPECT_EQ(s->series, "");
}

TEST(PrometheusAnswer, AOneElementVector) {
  auto s = parse_prometheus_answer(
      vector_of(R"({"metric":{"__name__":"errors","job":"api"},"value":[1700000000,"12.75"]})"));
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_DOUBLE_EQ(s->value, 12.75);
  EXPECT_EQ(s->series, R"(errors{job="api"})");
  auto noname = parse_prometheus_answer(vector_of(R"({"metric":{},"value":[1,"3"]})"));
  ASSERT_TRUE(noname.ok());
  EXPECT_EQ(noname->series, "{}");
}

TEST(PrometheusAnswer, SpecialValues) {
  auto nan = parse_prometheus_answer(vector_of(R"({"metric":{},"value":[1,"NaN"]})"));
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan(nan->value));
  auto inf = parse_prometheus_answer(vector_of(R"({"metric":{},"value":[1,"+Inf"]})"));
  ASSERT_TRUE(inf.ok());
  EXPECT_TRUE(std::isinf(inf->value) && inf->value > 0);
  auto neg = parse_prometheus_answer(vector_of(R"({"metric":{},"value":[1,"-Inf"]})"));
  ASSERT_TRUE(neg.ok());
  EXPECT_LT(neg->value, 0);
  EXPECT_DOUBLE_EQ(parse_prometheus_answer(vector_of(R"({"metric":{},"value":[1,"-2e-3"]})"))->value, -0.002);
}

struct Refused {
  const char* name;
  std::string body;
  const char* says;
};

class PrometheusAnswerRefused : public ::testing::TestWithParam<Refused> {};

TEST_P(PrometheusAnswerRefused, SaysWhy) {
  auto s = parse_prometheus_answer(GetParam().body);
  ASSERT_FALSE(s.ok()) << "accepted " << GetParam().body;
  EXPECT_NE(s.error().message.find(GetParam().says), std::string::npos) << s.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Answers, PrometheusAnswerRefused,
    ::testing::Values(
        Refused{"empty", vector_of(""), "matched no series"},
        Refused{"multi_series",
                vector_of(R"({"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]})"),
                "returned 2 series ({a=\"1\"}, ...): it must return one"},
        Refused{"error_status",
                R"({"status":"error","errorType":"bad_data","error":"1:4: parse error: unexpected right parenthesis"})",
                "Prometheus says bad_data: 1:4: parse error"},
        Refused{"matrix", R"({"status":"success","data":{"resultType":"matrix","result":[]}})", "returned a matrix"},
        Refused{"string", R"({"status":"success","data":{"resultType":"string","result":[1,"x"]}})",
                "returned a string"},
        Refused{"garbage", "<html><body>502 Bad Gateway</body></html>", "not Prometheus JSON"},
        Refused{"truncated", R"({"status":"success","data":{"resultType":"vec)", "not Prometheus JSON"},
        Refused{"not_an_object", "[1,2,3]", "not Prometheus JSON"}, Refused{"no_status", R"({"data":{}})", "no status"},
        Refused{"no_data", R"({"status":"success"})", "no data"},
        Refused{"no_result_type", R"({"status":"success","data":{"result":[]}})", "no resultType"},
        Refused{"value_not_string", vector_of(R"({"metric":{},"value":[1,2]})"), "not a string"},
        Refused{"value_not_number", vector_of(R"({"metric":{},"value":[1,"12abc"]})"), "not a number"},
        Refused{"value_empty", vector_of(R"({"metric":{},"value":[1,""]})"), "not a number"},
        Refused{"pair_too_short", vector_of(R"({"metric":{},"value":[1]})"), "not [time, \"value\"]"},
        Refused{"no_value", vector_of(R"({"metric":{}})"), "without a value"},
        Refused{"vector_not_list", R"({"status":"success","data":{"resultType":"vector","result":{}}})", "not a list"},
        Refused{"empty_body", "", "not Prometheus JSON"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(BurnRate, WindowsAreSubstitutedEverywhere) {
  EXPECT_EQ(substitute_window("ratio_rate{window}", "5m"), "ratio_rate5m");
  EXPECT_EQ(substitute_window("sum(rate(e[{window}])) / sum(rate(r[{window}]))", "1h"),
            "sum(rate(e[1h])) / sum(rate(r[1h]))");
  EXPECT_EQ(substitute_window(R"(x{code=~"5.."})", "1h"), R"(x{code=~"5.."})") << "label matchers stay";
}

TEST(BurnRate, PrometheusDurations) {
  EXPECT_DOUBLE_EQ(*parse_prometheus_duration("5m"), 300);
  EXPECT_DOUBLE_EQ(*parse_prometheus_duration("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*parse_prometheus_duration("1d"), 86400);
  EXPECT_DOUBLE_EQ(*parse_prometheus_duration("250ms"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_prometheus_duration("2m30s"), 150);
  for (const char* bad : {"", "5", "m", "5min", "30m1h", "1h1h", "0s", "-5m", "5 m", "1.5h"})
    EXPECT_FALSE(parse_prometheus_duration(bad).ok()) << bad;
}

}  // namespace
}  // namespace faultline
