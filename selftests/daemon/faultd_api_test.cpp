// faultd's local API: faultctl through it and without it, each route and its
// errors, the peer check, settings, and a clean stop.
#include <fcntl.h>
#include <poll.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "faultd_env.h"
#include "selftests/lib/test_bpffs.h"

namespace fldaemon {
namespace {

TEST_F(FaultdTest, FaultctlPrintsTheSameThroughFaultdAndStandalone) {
  start_faultd();
  // faultd loads its packet programs at its start, an idle state; a standalone
  // faultctl tears an idle state down (as it does one that a run left), so
  // once one has run, both see the same kernel.
  ASSERT_TRUE(faultctl({"status"}, false).status.is(0));
  const std::vector<std::vector<std::string>> commands = {
      {"status"},     {"status", "--json"}, {"features"},    {"features", "--json"},
      {"abort", "7"}, {"abort", "r9"},      {"abort", "s9"}, {"abort", "--all"}};
  for (const auto& args : commands) {
    const std::string what = args[0] == "abort" ? "POST" : "GET";
    const size_t before = served(what);
    const CommandResult via = faultctl(args, true);
    const CommandResult alone = faultctl(args, false);
    EXPECT_EQ(served(what, before + 1), before + 1)
        << "faultctl " << args[0] << " did not go through faultd: " << faultd().err();
    EXPECT_EQ(via.status.code, alone.status.code) << via.describe() << "\n---\n" << alone.describe();
    EXPECT_EQ(via.out, alone.out) << "faultctl " << args[0];
    EXPECT_EQ(via.err, alone.err) << "faultctl " << args[0];
  }
  // The answers themselves: no faults here; unknown IDs are exit 2.
  EXPECT_TRUE(faultctl({"status"}, true).status.is(0));
  const CommandResult missing = faultctl({"abort", "7"}, true);
  EXPECT_TRUE(missing.status.is(2)) << missing.describe();
  EXPECT_NE(missing.err.find("no active fault 7"), std::string::npos) << missing.describe();
  const CommandResult all = faultctl({"abort", "--all"}, true);
  EXPECT_TRUE(all.status.is(0)) << all.describe();
  EXPECT_NE(all.out.find("all faults ended (kill switch)"), std::string::npos) << all.describe();
}

// A faultctl meant for another state (its own FAULTLINE_BPFFS_ROOT) that finds
// this faultd's socket is told 409 and runs standalone on its own state.
TEST_F(FaultdTest, AFaultctlForAnotherStateIsRefusedAndRunsStandalone) {
  start_faultd();
  std::vector<std::string> other = env();
  const std::string other_root = "/sys/fs/bpf/fltest-faultd-other-" + std::to_string(::getpid());
  other[0] = "FAULTLINE_BPFFS_ROOT=" + other_root;
  const CommandResult r = fltest::run_command({FAULTCTL_PATH, "abort", "5"}, {.env = other}, 30s);
  fltest::remove_test_bpffs_root(other_root);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_EQ(r.err, "faultctl abort: no active fault 5\n");
  EXPECT_EQ(served("POST /v1/faults/5/abort 409", 1), 1u) << faultd().err();
  const Reply direct = request("GET", "/v1/status");
  EXPECT_EQ(direct.status, 200) << "a client that names no state (curl) is served";
}

TEST_F(FaultdTest, StatusAndFeaturesAreTheJsonFaultctlPrints) {
  start_faultd();
  // faultd loads its packet programs at its start, an idle state; a standalone
  // faultctl tears an idle state down (as it does one that a run left), so
  // once one has run, both see the same kernel.
  ASSERT_TRUE(faultctl({"status"}, false).status.is(0));
  const Reply status = request("GET", "/v1/status");
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(status.body, faultctl({"status", "--json"}, false).out);
  auto doc = nlohmann::json::parse(status.body);
  EXPECT_TRUE(doc.contains("faults") && doc.contains("syscall_faults") && doc.contains("guards")) << status.body;
  const Reply features = request("GET", "/v1/features");
  ASSERT_EQ(features.status, 200) << features.body;
  EXPECT_EQ(features.body, faultctl({"features", "--json"}, false).out);
  const Reply text = request("GET", "/v1/features?format=text");
  EXPECT_EQ(text.status, 200);
  EXPECT_EQ(text.body, faultctl({"features"}, false).out);
  const Reply bad = request("GET", "/v1/status?format=xml");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("format must be json or text"), std::string::npos) << bad.body;
}

TEST_F(FaultdTest, RoutesAnswerWithTheirErrors) {
  start_faultd();
  // A run request without its experiment (selftests/daemon/run_via_faultd_test.cpp runs real ones).
  const Reply runs = request("POST", "/v1/runs");
  EXPECT_EQ(runs.status, 400) << runs.body;
  EXPECT_NE(nlohmann::json::parse(runs.body)["error"].get<std::string>().find("a run request is {\"experiment\""),
            std::string::npos)
      << runs.body;
  const std::string wrong_method = raw_exchange("DELETE /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(wrong_method), 405) << wrong_method;
  EXPECT_NE(wrong_method.find("\r\nAllow: GET\r\n"), std::string::npos) << wrong_method;
  EXPECT_EQ(request("GET", "/v1/nothing").status, 404);
  const Reply bad_id = request("POST", "/v1/faults/x1/abort");
  EXPECT_EQ(bad_id.status, 400) << bad_id.body;
  auto err = nlohmann::json::parse(bad_id.body);
  EXPECT_EQ(err["status"], 400);
  EXPECT_TRUE(err["error"].is_string());
  const Reply missing = request("POST", "/v1/faults/42/abort");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_EQ(nlohmann::json::parse(missing.body)["exit_code"], 2) << missing.body;

  // Bad requests: malformed, a head too large, a body too large.
  EXPECT_EQ(status_of(raw_exchange("GET /v1/status HTTP/1.1\r\nHost x\r\n\r\n")), 400);
  EXPECT_EQ(status_of(raw_exchange("GET /v1/status HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n")), 431);
  EXPECT_EQ(status_of(raw_exchange("POST /v1/abort-all HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n")), 413);
  EXPECT_EQ(status_of(raw_exchange("GET /v1/status HTTP/2.0\r\n\r\n")), 505);

  // Keep-alive and pipelining: two requests on one connection, two answers in order.
  const std::string two = raw_exchange(
      "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\nPOST /v1/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Length: 2\r\n\r\n{}");
  const size_t second = two.find("HTTP/1.1 400");
  EXPECT_EQ(two.rfind("HTTP/1.1 404", 0), 0u) << two;
  EXPECT_NE(second, std::string::npos) << two;
  // A chunked body is read too (and ends in the same 400: {} is no run request).
  const std::string chunked = raw_exchange(
      "POST /v1/runs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      "2\r\n{}\r\n0\r\n\r\n");
  EXPECT_EQ(status_of(chunked), 400) << chunked;
}

TEST_F(FaultdTest, TheSocketIsRootOnlyAndAnotherUidGets403) {
  start_faultd();
  struct stat st {};
  ASSERT_EQ(::stat(socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
  // A child as uid nobody (effective) that still may open the socket file
  // (filesystem uid 0): the API must refuse it on its credentials alone.
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    if (::setresgid(65534, 65534, 0) != 0 || ::seteuid(65534) != 0) ::_exit(3);
    (void)::setfsuid(0);
    const std::string raw = raw_exchange("GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    (void)!::write(pipefd[1], raw.data(), raw.size());
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int ws = 0;
  ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
  ASSERT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0) << "the child could not become nobody";
  EXPECT_EQ(status_of(raw), 403) << raw;
  EXPECT_NE(raw.find("root only (peer uid 65534)"), std::string::npos) << raw;
  EXPECT_TRUE(faultd().wait_for("GET /v1/status 403", 5s, fltest::Stream::kStderr)) << faultd().err();
}

TEST_F(FaultdTest, SigtermStopsCleanlyAndRemovesTheSocket) {
  start_faultd();
  ASSERT_TRUE(std::filesystem::exists(socket_path()));
  faultd().signal(SIGTERM);
  auto st = faultd().wait(5000ms);
  ASSERT_TRUE(st) << faultd().describe();
  EXPECT_TRUE(st->is(0)) << st->str();
  EXPECT_FALSE(std::filesystem::exists(socket_path())) << "the socket outlived faultd";
  EXPECT_NE(faultd().err().find("faultd: stopping"), std::string::npos) << faultd().err();
  // Without faultd, faultctl works standalone at the same socket path.
  EXPECT_TRUE(faultctl({"status"}, true).status.is(0));
}

// Type=notify as systemd sees it: a datagram socket at NOTIFY_SOCKET gets
// READY=1 once the API listens, and STOPPING=1 on SIGTERM.
TEST_F(FaultdTest, NotifiesReadyAndStoppingForSystemd) {
  const std::string notify = dir() + "/notify.sock";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, notify.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto next_message = [fd]() -> std::string {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) return "";
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  };
  std::vector<std::string> e = env();
  e.push_back("NOTIFY_SOCKET=" + notify);
  ChildProcess d = ChildProcess::spawn(
      {FAULTD_PATH, "--foreground", "--socket", socket_path(), "--metrics", "off", "--toxiproxy", "off"},
      {.env = e, .stop_grace = 3000ms});
  EXPECT_EQ(next_message(), "READY=1") << d.describe();
  EXPECT_TRUE(std::filesystem::exists(socket_path())) << "READY=1 before the socket listens";
  d.signal(SIGTERM);
  EXPECT_EQ(next_message(), "STOPPING=1") << d.describe();
  auto st = d.wait(5000ms);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->is(0)) << st->str();
  ::close(fd);
}

// A foreground faultd whose stderr is a pipe nobody reads (a 4 KiB one: about
// a hundred request lines) keeps answering: its request log waits in a queue
// of its own, and every line is there once the pipe is read.
TEST_F(FaultdTest, AStderrNobodyReadsDoesNotStallTheApi) {
  const std::string fifo = dir() + "/stderr.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // Held open for reading and writing: faultd's open does not wait, and its
  // writes fill the pipe rather than fail.
  const int held = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(held, 0) << std::strerror(errno);
  ASSERT_GT(::fcntl(held, F_SETPIPE_SZ, 4096), 0) << std::strerror(errno);
  ChildProcess d =
      ChildProcess::spawn({"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>\"" + fifo + "\"", FAULTD_PATH, "--foreground",
                           "--socket", socket_path(), "--metrics", "off", "--toxiproxy", "off"},
                          {.env = env(), .stop_grace = 3000ms});
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  while (request("GET", "/v1/status").status != 200) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "faultd did not serve: " << d.describe();
    std::this_thread::sleep_for(50ms);
  }
  constexpr int kRequests = 2000;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(request("GET", "/v1/status").status, 200) << "request " << i << " with the log unread";
  }
  // Now read it: every request's line is there, none dropped.
  std::string log;
  char buf[65536];
  for (;;) {
    pollfd p{held, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) break;
    const ssize_t n = ::read(held, buf, sizeof buf);
    if (n <= 0) break;
    log.append(buf, static_cast<size_t>(n));
  }
  size_t lines = 0;
  for (size_t at = log.find("GET /v1/status 200"); at != std::string::npos; at = log.find("GET /v1/status 200", at + 1))
    ++lines;
  EXPECT_GE(lines, static_cast<size_t>(kRequests)) << log.substr(0, 300);
  EXPECT_EQ(log.find("log lines dropped"), std::string::npos);
  EXPECT_NE(log.find("faultd: serving: "), std::string::npos);
  d.stop(3000ms);
  ::close(held);
}

TEST_F(FaultdTest, BadSettingsAreNamedAndExit2) {
  const std::string config = dir() + "/faultd.json";
  auto faultd_with = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {FAULTD_PATH, "--foreground"};
    argv.insert(argv.end(), args.begin(), args.end());
    return fltest::run_command(argv, {.env = env()}, 10s);
  };
  std::ofstream(config) << R"({"socket": "/tmp/x.sock", "metrcs": "off"})";
  CommandResult r = faultd_with({"--config", config});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("unknown field \"metrcs\""), std::string::npos) << r.err;
  std::ofstream(config) << R"({"metrics": 9469})";
  r = faultd_with({"--config", config});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("\"metrics\" must be a string"), std::string::npos) << r.err;
  std::ofstream(config) << "{not json";
  r = faultd_with({"--config", config});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  r = faultd_with({"--metrics", "10.1.2.3:9469"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("not a loopback address"), std::string::npos) << r.err;
  r = faultd_with({"--socket", "relative.sock"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  r = faultd_with({"--bogus"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("unknown argument '--bogus'"), std::string::npos) << r.err;
  r = faultd_with({"--config", dir() + "/absent.json"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  r = faultd_with({"--toxiproxy", "0.0.0.0:8474"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("the Toxiproxy API has no authentication"), std::string::npos) << r.err;
  r = faultd_with({"--proxy-workers", "lots"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--proxy-workers: 'lots' is not a number of workers"), std::string::npos) << r.err;
  r = faultd_with({"--toxic-max-duration", "2d"});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--toxic-max-duration"), std::string::npos) << r.err;
  std::ofstream(config) << R"({"proxy_workers": -1})";
  r = faultd_with({"--config", config});
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("\"proxy_workers\" must be a whole number"), std::string::npos) << r.err;
}

TEST_F(FaultdTest, TheConfigFileSetsTheSocketAndMetricsOff) {
  const std::string config = dir() + "/faultd.json";
  const std::string sock = dir() + "/from-config.sock";
  std::ofstream(config) << R"({"socket": ")" << sock
                        << R"(", "metrics": "off", "toxiproxy": "off", "foreground": true})";
  ChildProcess d = ChildProcess::spawn({FAULTD_PATH, "--config", config}, {.env = env(), .stop_grace = 3000ms});
  ASSERT_TRUE(wait_serving(d)) << d.describe();
  EXPECT_NE(d.err().find("API on " + sock + ", metrics off"), std::string::npos) << d.err();
  EXPECT_TRUE(std::filesystem::exists(sock));
  d.stop(3000ms);
  EXPECT_FALSE(std::filesystem::exists(sock));
}

// Without --foreground faultd detaches: the command returns once the API serves.
TEST_F(FaultdTest, WithoutForegroundItDetachesOnceServing) {
  const CommandResult r = fltest::run_command(
      {FAULTD_PATH, "--socket", socket_path(), "--metrics", "off", "--toxiproxy", "off"}, {.env = env()}, 20s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(request("GET", "/v1/status").status, 200) << "not serving when the command returned";
  // The detached faultd, found by its own socket path on its command line.
  pid_t daemon = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (cmd.rfind(std::string(FAULTD_PATH) + '\0', 0) == 0 && cmd.find(socket_path()) != std::string::npos)
      daemon = static_cast<pid_t>(std::stol(name));
  }
  ASSERT_NE(daemon, 0) << "no detached faultd found";
  EXPECT_EQ(::getsid(daemon), daemon) << "not in a session of its own";
  ASSERT_EQ(::kill(daemon, SIGTERM), 0);
  for (int i = 0; i < 50 && std::filesystem::exists(socket_path()); ++i) std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(std::filesystem::exists(socket_path())) << "the detached faultd did not stop on SIGTERM";
}

TEST_F(FaultdTest, ASecondFaultdOnTheSameSocketIsRefused) {
  start_faultd();
  CommandResult r = fltest::run_command(
      {FAULTD_PATH, "--foreground", "--socket", socket_path(), "--metrics", "off", "--toxiproxy", "off"},
      {.env = env()}, 10s);
  EXPECT_TRUE(r.status.is(1)) << r.describe();
  EXPECT_NE(r.err.find("another server answers on"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::exists(socket_path())) << "the second faultd removed the first one's socket";
  EXPECT_EQ(request("GET", "/v1/status").status, 200);
}

}  // namespace
}  // namespace fldaemon
