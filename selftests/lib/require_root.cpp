// FL_REQUIRE_ROOT's message.
#include "selftests/lib/require_root.h"

#include <cstdio>

namespace fltest {

std::string announce_root_skip(const std::string& why) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  std::string text = "*** SKIPPED " + name + ": needs root for " + why + "; run it as root ***";
  std::fprintf(stderr, "\n%s\n", text.c_str());
  return text;
}

}  // namespace fltest
