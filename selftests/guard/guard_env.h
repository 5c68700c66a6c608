// The environment a guard under test starts with: its CA in the test's folder,
// the runtime folder's default (XDG_RUNTIME_DIR unset), and none of the test
// process's own proxy variables; and what the suites read back (one request
// of a stand-in upstream, the activity log's entries of one kind).
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "selftests/lib/child_process.h"

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

// One HTTP request read from fd, framed by its Content-Length (a stand-in
// upstream's reading); none if the peer closed before it was whole.
inline std::optional<std::string> read_one_request(int fd) {
  std::string data;
  char b[8192];
  size_t need = std::string::npos;
  for (;;) {
    const size_t end = data.find("\r\n\r\n");
    if (end != std::string::npos && need == std::string::npos) {
      need = end + 4;
      std::string head = data.substr(0, end);
      for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (auto cl = head.find("content-length:"); cl != std::string::npos) need += std::stoul(head.substr(cl + 15));
    }
    if (need != std::string::npos && data.size() >= need) return data;
    const ssize_t n = ::recv(fd, b, sizeof b, 0);
    if (n <= 0) return std::nullopt;
    data.append(b, static_cast<size_t>(n));
  }
}

// The entries of an activity log (--json-log FILE) whose kind is `kind`, in order.
inline std::vector<nlohmann::json> activity_of_kind(const std::string& file, const std::string& kind) {
  std::ifstream in(file);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("kind", "") == kind) out.push_back(j);
  }
  return out;
}

// faultctl guard FLAGS --json-log ACTIVITY -- COMMAND, as nobody when the test
// is root (the request guard alone, as any user runs it).
inline std::vector<std::string> guard_argv(const std::string& faultctl, const std::vector<std::string>& flags,
                                           const std::string& activity, const std::vector<std::string>& command) {
  std::vector<std::string> argv = {faultctl, "guard"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--json-log", activity, "--"});
  argv.insert(argv.end(), command.begin(), command.end());
  return as_nobody(std::move(argv));
}

}  // namespace fltest
