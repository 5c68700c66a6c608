// The fixture of the daemon tests: a private bpffs root, state folder and
// socket; faultd started as a real process; faultctl with or without it; raw
// requests on the socket.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "selftests/lib/child_process.h"

namespace fldaemon {

using fltest::ChildProcess;
using fltest::CommandResult;
using namespace std::chrono_literals;

class FaultdTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // FAULTLINE_BPFFS_ROOT, FAULTLINE_RUN_DIR and FAULTLINE_FAULTD_SOCKET: ours.
  [[nodiscard]] std::vector<std::string> env() const;
  // The same, with FAULTLINE_FAULTD_SOCKET at a path nobody serves: standalone.
  [[nodiscard]] std::vector<std::string> standalone_env() const;
  [[nodiscard]] const std::string& socket_path() const { return socket_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] const std::string& bpffs_root() const { return bpffs_root_; }

  // faultd --foreground --socket <ours> --metrics 127.0.0.1:0 --toxiproxy
  // 127.0.0.1:0 --proxy-workers 1 EXTRA..., waited for until it serves; the
  // metrics and Toxiproxy API ports are read from its "serving" line.
  // Output::kFiles for a test that makes faultd log more than a pipe holds
  // while it is busy elsewhere (faultd would block on its stderr).
  void start_faultd(const std::vector<std::string>& extra = {}, fltest::Output output = fltest::Output::kPipes);
  // The same, faultd running in the network namespace NAME (/run/netns/NAME).
  void start_faultd_in(const std::string& netns, const std::vector<std::string>& extra = {},
                       fltest::Output output = fltest::Output::kPipes);
  [[nodiscard]] ChildProcess& faultd() { return *faultd_; }
  [[nodiscard]] uint16_t metrics_port() const { return metrics_port_; }
  [[nodiscard]] uint16_t toxiproxy_port() const { return toxiproxy_port_; }
  // How many requests for `what` ("GET /v1/status") faultd has logged,
  // waiting up to 5 s for at least at_least (its log is written by a thread
  // of its own, a moment after the answer).
  [[nodiscard]] size_t served(const std::string& what, size_t at_least = 0);

  [[nodiscard]] CommandResult faultctl(const std::vector<std::string>& args, bool through_faultd) const;

  // Sends raw bytes on a new connection to the socket and reads until the
  // server closes (or 5 s pass): everything it answered.
  [[nodiscard]] std::string raw_exchange(const std::string& bytes) const;
  // One request with Connection: close; the status code and body.
  struct Reply {
    int status = 0;
    std::string body;
  };
  [[nodiscard]] Reply request(const std::string& method, const std::string& target) const;

 private:
  std::string dir_, bpffs_root_, run_dir_, socket_;
  std::optional<ChildProcess> faultd_;
  uint16_t metrics_port_ = 0;
  uint16_t toxiproxy_port_ = 0;
};

// One HTTP request on a new loopback TCP connection to port (Connection: close).
struct TcpReply {
  int status = 0;  // 0: no answer
  std::string body;
};
[[nodiscard]] TcpReply http(uint16_t port, const std::string& method, const std::string& path,
                            const std::string& body = "", const std::string& extra_headers = "");

// Waits (15 s) for faultd's whole "faultd: serving: ..." line on its stderr.
[[nodiscard]] bool wait_serving(ChildProcess& d);

// The status code and body of one raw HTTP reply ("HTTP/1.1 200 OK\r\n...").
[[nodiscard]] int status_of(const std::string& raw);
[[nodiscard]] std::string body_of(const std::string& raw);

}  // namespace fldaemon
