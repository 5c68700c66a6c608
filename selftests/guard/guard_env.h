// The environment a guard under test starts with: its CA in the test's folder,
// the runtime folder's default (XDG_RUNTIME_DIR unset), and none of the test
// process's own proxy variables.
#pragma once

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <optional>
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

}  // namespace fltest
