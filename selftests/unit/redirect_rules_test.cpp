// --redirect DEST=TARGET: what the parser keeps and what the compiler puts in the
// redirect trie (covering sets, longest prefix first, targets in every slot).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

#include "userspace/net/egress_rules.h"

namespace faultline {
namespace {

fl_addr mapped(const char* v4) {
  fl_addr a{};
  a.b[10] = a.b[11] = 0xff;
  inet_pton(AF_INET, v4, a.b + 12);
  return a;
}

fl_addr v6(const char* s) {
  fl_addr a{};
  inet_pton(AF_INET6, s, a.b);
  return a;
}

bool same(const fl_addr& x, const fl_addr& y) { return std::memcmp(x.b, y.b, 16) == 0; }

TEST(Redirect, ParsesDestinationAndTarget) {
  auto r = parse_redirect("10.0.0.0/8:8000-8010/tcp=127.0.0.1:18080");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->dest.prefix.v4);
  EXPECT_EQ(r->dest.prefix.plen, 96 + 8);
  EXPECT_EQ(r->dest.ports.lo, 8000);
  EXPECT_EQ(r->dest.ports.hi, 8010);
  EXPECT_EQ(r->dest.proto, IPPROTO_TCP);
  EXPECT_TRUE(same(r->target, mapped("127.0.0.1")));
  EXPECT_EQ(r->target_port, 18080);
  EXPECT_EQ(r->target_text(), "127.0.0.1:18080");

  auto r6 = parse_redirect("[2001:db8::/32]:443=[::1]:18443");
  ASSERT_TRUE(r6.ok()) << r6.error().message;
  EXPECT_FALSE(r6->dest.prefix.v4);
  EXPECT_EQ(r6->dest.prefix.plen, 32);
  EXPECT_TRUE(same(r6->target, v6("::1")));
  EXPECT_EQ(r6->target_text(), "[::1]:18443");

  auto any_port = parse_redirect("192.0.2.1=127.0.0.1:80");
  ASSERT_TRUE(any_port.ok());
  EXPECT_EQ(any_port->dest.ports.hi, 0);  // any port
}

TEST(Redirect, RefusesAFamilyChange) {
  auto r = parse_redirect("10.0.0.1:80=[::1]:80");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("the destination is IPv4 and the target IPv6"), std::string::npos)
      << r.error().message;
}

TEST(Redirect, CompilesCoveringRulesLongestFirstWithTheirTargets) {
  std::vector<RedirectRule> rules;
  for (const char* t : {"10.0.0.0/8=127.0.0.1:1000", "10.1.0.0/16:53/udp=127.0.0.1:2000", "[2001:db8::1]=[::1]:3000"}) {
    auto r = parse_redirect(t);
    ASSERT_TRUE(r.ok()) << r.error().message;
    rules.push_back(*r);
  }
  auto c = compile_redirects(rules);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->entries.size(), 3u);
  bool saw16 = false;
  for (const auto& [k, b] : c->entries) {
    if (k.prefixlen != 96 + 16) continue;
    saw16 = true;
    EXPECT_TRUE(same(k.addr, mapped("10.1.0.0")));
    ASSERT_EQ(b.n, 2);
    // The /16's own rule first, then the /8 that covers it.
    EXPECT_EQ(b.r[0].id, 1);
    EXPECT_EQ(b.r[0].proto, IPPROTO_UDP);
    EXPECT_EQ(b.r[0].port_lo, 53);
    EXPECT_EQ(b.r[0].port_hi, 53);
    EXPECT_EQ(b.r[0].v4, 1);
    EXPECT_TRUE(same(b.r[0].target, mapped("127.0.0.1")));
    EXPECT_EQ(b.r[0].target_port, 2000);
    EXPECT_EQ(b.r[1].id, 0);
    EXPECT_EQ(b.r[1].port_hi, 0);
    EXPECT_EQ(b.r[1].target_port, 1000);
  }
  EXPECT_TRUE(saw16);
  for (const auto& [k, b] : c->entries) {
    if (k.prefixlen != 128) continue;
    ASSERT_EQ(b.n, 1);
    EXPECT_EQ(b.r[0].v4, 0);
    EXPECT_TRUE(same(b.r[0].target, v6("::1")));
    EXPECT_EQ(b.r[0].target_port, 3000);
  }
}

}  // namespace
}  // namespace faultline
