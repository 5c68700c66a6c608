// LineWriter: lines written in order by its own thread; a reader that falls
// behind makes it drop lines and count them, never makes post() wait.
#include "base/line_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace {

using faultline::LineWriter;
using namespace std::chrono_literals;

// Reads what is in fd until nothing more comes for `quiet`.
std::string read_until_quiet(int fd, std::chrono::milliseconds quiet) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(quiet.count())) <= 0) return out;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

TEST(LineWriterTest, WritesEveryLineInOrderWhenTheReaderKeepsUp) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  LineWriter& w = LineWriter::open(p[1], 2000, "test");
  std::string want;
  for (int i = 0; i < 1000; ++i) {  // about 9 KB: the pipe holds it all
    w.post("line " + std::to_string(i));
    want += "line " + std::to_string(i) + "\n";
  }
  EXPECT_TRUE(w.drain(10s));
  EXPECT_EQ(w.dropped(), 0U);
  EXPECT_EQ(read_until_quiet(p[0], 200ms), want);
  ::close(p[0]);
  ::close(p[1]);
}

TEST(LineWriterTest, AReaderThatFallsBehindCostsDroppedLinesNotAWait) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_GT(::fcntl(p[1], F_SETPIPE_SZ, 4096), 0);
  LineWriter& w = LineWriter::open(p[1], 4, "test");
  const std::string body(2000, 'x');
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) w.post(std::to_string(i) + " " + body);
  // Nobody reads yet: the pipe holds 2 lines, the queue 4 more.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "post() waited on the reader";
  EXPECT_FALSE(w.drain(100ms));
  const size_t dropped = w.dropped();
  EXPECT_GT(dropped, 80U);
  std::string out;
  while (!w.drain(10ms)) out += read_until_quiet(p[0], 50ms);
  out += read_until_quiet(p[0], 200ms);
  size_t lines = 0, last = 0;
  bool in_order = true;
  for (size_t at = 0; at < out.size();) {
    const size_t nl = out.find('\n', at);
    ASSERT_NE(nl, std::string::npos) << "a line was cut";
    const std::string line = out.substr(at, nl - at);
    at = nl + 1;
    if (line.rfind("test: ", 0) == 0) {
      EXPECT_EQ(line, "test: " + std::to_string(dropped) + " log lines dropped: the log's reader fell behind");
      continue;
    }
    const size_t n = std::stoul(line.substr(0, line.find(' ')));
    if (lines > 0 && n <= last) in_order = false;
    last = n;
    ++lines;
  }
  EXPECT_TRUE(in_order) << out.substr(0, 200);
  EXPECT_EQ(lines + dropped, 100U);
  EXPECT_NE(out.find("log lines dropped"), std::string::npos) << "the drop was not said";
  ::close(p[0]);
  ::close(p[1]);
}

}  // namespace
