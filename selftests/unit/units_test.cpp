// Value parsers: durations, percents, rates, ports, prefixes.
#include "base/units.h"

#include <gtest/gtest.h>

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

TEST(Units, AddressAndPort) {
  auto v4 = parse_address_port("127.0.0.1:40123");
  ASSERT_TRUE(v4.ok()) << v4.error().message;
  EXPECT_EQ(addr_text(v4->first), "127.0.0.1");
  EXPECT_EQ(v4->second, 40123);
  auto v6 = parse_address_port("[::1]:80");
  ASSERT_TRUE(v6.ok()) << v6.error().message;
  EXPECT_EQ(addr_text(v6->first), "::1");
  EXPECT_EQ(v6->second, 80);
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536", "10.0.0.0/8:80", "name:80"}) {
    auto r = parse_address_port(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
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
