// The environment a guard under test starts with: its CA in the test's folder,
// the runtime folder's default (XDG_RUNTIME_DIR unset), and none of the test
// process's own proxy variables.
#pragma once

#include <string>
#include <vector>

namespace fltest {

inline std::vector<std::string> guard_env(const std::string& dir, const std::vector<std::string>& more = {}) {
  std::vector<std::string> env = {"FAULTLINE_CA_DIR=" + dir + "/ca",
                                  "XDG_RUNTIME_DIR=",
                                  "NO_PROXY=",
                                  "no_proxy=",
                                  "HTTP_PROXY=",
                                  "HTTPS_PROXY=",
                                  "http_proxy=",
                                  "https_proxy="};
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

}  // namespace fltest
