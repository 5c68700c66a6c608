// The event-stream parser of the MCP bridge: fields, line ends, comments and
// the bound on an event's size.
#include "userspace/net/sse_parser.h"

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(SseParser, EventsFieldsAndLineEnds) {
  SseParser p(1024);
  auto ev = p.feed("event: endpoint\ndata: /message?sessionId=1\n\n: a comment\r\ndata: {\"a\":\r\ndata:1}\r\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].type, "endpoint");
  EXPECT_EQ(ev[0].data, "/message?sessionId=1");
  ev = p.feed("\r\nid: 7\rdata: x\r\r");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].type, "message");
  EXPECT_EQ(ev[0].data, "{\"a\":\n1}");
  EXPECT_EQ(ev[1].id, "7");
  EXPECT_EQ(ev[1].data, "x");
  EXPECT_TRUE(p.feed("event: x\n\n").empty());  // no data: no event
}

TEST(SseParser, AnOversizedEventIsDroppedAndTheStreamGoesOn) {
  SseParser p(16);
  auto ev = p.feed("data: " + std::string(200, 'a') + "\n\ndata: b\n");
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(p.oversized(), 1u);
  ev = p.feed("\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "b");
  // Too many data lines, each small.
  ev = p.feed("data: 12345678\ndata: 12345678\ndata: 1\n\ndata: c\n\n");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].data, "c");
  EXPECT_EQ(p.oversized(), 2u);
}

}  // namespace
}  // namespace faultline
