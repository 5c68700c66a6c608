// slicer: what the client reads arrives in slices of average_size +- size_variation,
// delay microseconds apart.
#include <gtest/gtest.h>

#include "selftests/lib/clock.h"
#include "selftests/proxy/proxy_fixture.h"

namespace {

using fltest::UniqueFd;

TEST(SlicerToxic, ChunksComeInSlicesOfTheAskedSize) {
  const size_t total = 10'000;
  fltest::ScriptServer server([&](UniqueFd fd) { fltest::send_all(fd.get(), fltest::pattern(total, 5)); });
  auto p = fltest::start_proxy(server.port());
  ASSERT_TRUE(p.registry);
  ASSERT_TRUE(
      p.registry
          ->add_toxic(
              "p",
              fltest::toxic(R"({"type":"slicer","attributes":{"average_size":100,"size_variation":20,"delay":2000}})"))
          .ok());
  UniqueFd c = fltest::connect_loopback(p.port);
  uint64_t start = fltest::monotonic_ns();
  std::string got;
  std::vector<size_t> sizes;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      ADD_FAILURE() << "the stream ended after " << got.size() << " bytes: " << (n == 0 ? "FIN" : strerror(errno));
      break;
    }
    got.append(buf, size_t(n));
    sizes.push_back(size_t(n));
    if (got.size() == total) break;
  }
  double seconds = double(fltest::monotonic_ns() - start) / 1e9;
  const std::string want = fltest::pattern(total, 5);
  ASSERT_EQ(got.size(), want.size());
  auto diff = std::mismatch(got.begin(), got.end(), want.begin());
  ASSERT_TRUE(diff.first == got.end()) << "the bytes differ from offset " << (diff.first - got.begin());
  size_t in_range = 0, max_size = 0;
  for (size_t s : sizes) {
    in_range += (s >= 80 && s <= 120) ? 1 : 0;
    max_size = std::max(max_size, s);
  }
  std::printf("slicer 100+-20 bytes, 2 ms apart: %zu reads, %zu in [80, 120], largest %zu, %.3f s\n", sizes.size(),
              in_range, max_size, seconds);
  // The last slice of each chunk the proxy received may be shorter.
  EXPECT_GE(in_range + 3, sizes.size());
  EXPECT_LE(max_size, 120u);
  EXPECT_GE(sizes.size(), total / 120);
  // At least (slices - 1) delays of 2 ms.
  EXPECT_GE(seconds, 0.002 * double(total / 120 - 1));
}

}  // namespace
