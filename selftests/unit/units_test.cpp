// Value parsers: durations, percents, rates, ports, prefixes.
#include <gtest/gtest.h>

#include "base/units.h"
#include "userspace/net/address.h"

namespace faultline {
namespace {

TEST(Units, Durations) {
  EXPECT_EQ(*parse_duration_ns("30s"), 30'000'000'000ULL);
  EXPECT_EQ(*parse_duration_ns("500ms"), 500'000'000ULL);
  EXPECT_EQ(*parse_duration_ns("1.5s"), 1'500'000'000ULL);
  EXPECT_EQ(*parse_duration_ns("2m"), 120'000'000'000ULL);
  EXPECT_EQ(*parse_duration_ns("1h"), 3'600'000'000'000ULL);
  EXPECT_EQ(*parse_duration_ns("250us"), 250'000ULL);
  EXPECT_FALSE(parse_duration_ns("").ok());
  EXPECT_FALSE(parse_duration_ns("s").ok());
  EXPECT_FALSE(parse_duration_ns("1.2.3s").ok());
  EXPECT_FALSE(parse_duration_ns("99999999999h").ok());
}

TEST(Units, Percent) {
  EXPECT_DOUBLE_EQ(*parse_percent("30"), 30);
  EXPECT_DOUBLE_EQ(*parse_percent("0.5%"), 0.5);
  EXPECT_FALSE(parse_percent("100.1").ok());
  EXPECT_EQ(percent_to_prob(100), 0xFFFFFFFFU);
  EXPECT_EQ(percent_to_prob(0), 0U);
  EXPECT_NEAR(percent_to_prob(50) / 4294967295.0, 0.5, 1e-9);
}

TEST(Units, Rates) {
  EXPECT_EQ(*parse_rate_bps("10mbit"), 10'000'000ULL);
  EXPECT_EQ(*parse_rate_bps("1gbit"), 1'000'000'000ULL);
  EXPECT_EQ(*parse_rate_bps("1mbps"), 8'000'000ULL);
  EXPECT_FALSE(parse_rate_bps("10").ok());
  EXPECT_FALSE(parse_rate_bps("10furlongs").ok());
}

TEST(Units, Prefixes) {
  auto p = parse_prefix("10.1.0.0/16");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->v4);
  EXPECT_EQ(p->plen, 96 + 16);
  EXPECT_EQ(p->str(), "10.1.0.0/16");
  auto h = parse_prefix("10.1.2.3");
  EXPECT_TRUE(h->exact());
  EXPECT_TRUE(prefix_covers(*p, *h));
  EXPECT_FALSE(prefix_covers(*h, *p));
  auto six = parse_prefix("fd00::/8");
  ASSERT_TRUE(six.ok());
  EXPECT_FALSE(prefix_covers(*six, *h));
  EXPECT_TRUE(prefix_covers(Prefix{}, *h)) << "::/0 covers IPv4-mapped addresses";
  EXPECT_FALSE(parse_prefix("10.0.0.1/").ok());
  EXPECT_FALSE(parse_prefix("10.0.0.1/x").ok());
}

TEST(Units, Ports) {
  EXPECT_EQ(parse_port_range("80")->hi, 80);
  EXPECT_EQ(parse_port_range("1-65535")->hi, 65535);
  EXPECT_FALSE(parse_port_range("0").ok());
  EXPECT_FALSE(parse_port_range("5-").ok());
  EXPECT_FALSE(parse_port_range("-5").ok());
}

}  // namespace
}  // namespace faultline
