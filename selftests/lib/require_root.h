// The one way a test that needs root says it cannot run here: it is skipped, and
// says so loudly on stderr with the reason, so that a run without root never
// passes quietly.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace fltest {

// Prints "*** SKIPPED Suite.Test: needs root for <why> ***" to stderr and returns it.
[[nodiscard]] std::string announce_root_skip(const std::string& why);

}  // namespace fltest

// In SetUp() or a test body: skips the test unless it runs as root. `why` names
// what needs root, e.g. "network namespaces and BPF programs".
#define FL_REQUIRE_ROOT(why)                                                 \
  do {                                                                       \
    if (::geteuid() != 0) GTEST_SKIP() << ::fltest::announce_root_skip(why); \
  } while (0)
