// faultd's Toxiproxy-compatible API: the official Node.js client drives it
// against a real server through a real proxy; every bad request gets
// Toxiproxy's envelope, code and message and changes nothing; the toxics are
// Faultline faults (status lists them, abort --all and the kill file end them,
// a bound ends them, /metrics counts them).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "faultd_env.h"
#include "hello_server.h"

namespace fldaemon {
namespace {

// One HTTP/1.1 request on a new TCP connection to 127.0.0.1:port (Connection:
// close); the status and body of the answer, status 0 if none came.

using fltest::HelloServer;

// "ping" through the proxy at listen ("127.0.0.1:P"); what came back.
std::string through(const std::string& listen) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(listen.substr(listen.rfind(':') + 1))));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::send(fd, "ping", 4, MSG_NOSIGNAL) == 4) {
    char b[64];
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) == 1) {
      const ssize_t n = ::recv(fd, b, sizeof b, 0);
      if (n > 0) got.assign(b, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

nlohmann::json json_of(const TcpReply& r) { return nlohmann::json::parse(r.body, nullptr, false); }

class Toxiproxy : public FaultdTest {
 protected:
  // A proxy "web" in front of the hello server; its listen address.
  std::string make_proxy() {
    const TcpReply r = http(toxiproxy_port(), "POST", "/proxies",
                            R"({"name":"web","listen":"127.0.0.1:0","upstream":")" + hello_.address() + "\"}");
    EXPECT_EQ(r.status, 201) << r.body;
    return json_of(r).value("listen", "");
  }
  HelloServer hello_;
};

TEST_F(Toxiproxy, TheOfficialNodeClientDrivesFaultd) {
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  const std::string dir = TOXIPROXY_CLIENT_DIR;
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/toxiproxy-node-client"))
      << "toxiproxy-node-client is not installed: run scripts/install-deps.sh (npm ci in " << dir << ")";
  const CommandResult r = fltest::run_command(
      {"node", dir + "/client_test.js", "http://127.0.0.1:" + std::to_string(toxiproxy_port())}, {}, 120s);
  std::printf("%s", r.out.c_str());
  EXPECT_TRUE(r.status.is(0)) << r.describe() << "\nfaultd:\n" << faultd().err();
}

TEST_F(Toxiproxy, BadRequestsGetToxiproxysErrorsAndChangeNothing) {
  start_faultd();
  const uint16_t port = toxiproxy_port();
  ASSERT_NE(port, 0) << faultd().err();
  const std::string listen = make_proxy();
  ASSERT_EQ(http(port, "POST", "/proxies/web/toxics", R"({"type":"latency","attributes":{"latency":10}})").status, 200);
  const std::string before = http(port, "GET", "/proxies").body;
  const std::string up = hello_.address();
  struct Case {
    std::string method, path, body, headers;
    int status;
    std::string error;  // the whole "error" of the envelope
  };
  const Case cases[] = {
      {"POST", "/proxies", "{}", "", 400, "missing required field: name"},
      {"POST", "/proxies", R"({"name":"x"})", "", 400, "missing required field: upstream"},
      {"POST", "/proxies", "not json", "", 400, "bad request body: not JSON"},
      {"POST", "/proxies", "", "", 400, "bad request body: EOF"},
      {"POST", "/proxies", "[1]", "", 400, "bad request body: expected a JSON object, got array"},
      {"POST", "/proxies", R"({"name":"x","upstream":")" + up + R"(","enabled":"yes"})", "", 400,
       "bad request body: \"enabled\" must be true or false"},
      {"POST", "/proxies", R"({"name":"web","listen":"127.0.0.1:0","upstream":")" + up + "\"}", "", 409,
       "proxy already exists"},
      {"GET", "/proxies/nope", "", "", 404, "proxy not found"},
      {"DELETE", "/proxies/nope", "", "", 404, "proxy not found"},
      {"POST", "/proxies/nope/toxics", R"({"type":"latency"})", "", 404, "proxy not found"},
      {"POST", "/proxies/web", R"({"upstream":""})", "", 400, "missing required field: upstream"},
      {"POST", "/proxies/web/toxics", R"({"type":"sideways"})", "", 400, "invalid toxic type"},
      {"POST", "/proxies/web/toxics", R"({"attributes":{}})", "", 400, "invalid toxic type"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","stream":"sideways"})", "", 400,
       "stream was invalid, can be either upstream or downstream"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","name":"latency_downstream"})", "", 409,
       "toxic already exists"},
      {"GET", "/proxies/web/toxics/nope", "", "", 404, "toxic not found"},
      {"DELETE", "/proxies/web/toxics/nope", "", "", 404, "toxic not found"},
      {"POST", "/populate", R"([{"name":"b"}])", "", 400, "missing required field: upstream at proxy 1"},
      {"GET", "/proxies", "", "User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n", 403, "User agent not allowed"},
      {"PUT", "/proxies", "", "", 405, "PUT is not allowed on /proxies (allowed: GET, POST)"},
  };
  for (const Case& c : cases) {
    const TcpReply r = http(port, c.method, c.path, c.body, c.headers);
    const nlohmann::json j = json_of(r);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.path << " " << c.body << " -> " << r.body;
    EXPECT_TRUE(j.is_object() && j.value("status", 0) == c.status && j.value("error", "") == c.error)
        << c.method << " " << c.path << " " << c.body << " -> " << r.body << " (want error \"" << c.error << "\")";
  }
  // A toxic attribute of the wrong type: Toxiproxy's decoder error, ours names the field.
  for (const std::string& body : {std::string(R"({"type":"latency","name":"l","attributes":{"latency":1.5}})"),
                                  std::string(R"({"type":"bandwidth","attributes":{"rate":"fast"}})")}) {
    const TcpReply r = http(port, "POST", "/proxies/web/toxics", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(json_of(r).value("error", "").rfind("bad request body: toxic: \"attributes.", 0), 0u)
        << body << " -> " << r.body;
  }
  EXPECT_EQ(http(port, "GET", "/proxies").body, before) << "a refused request changed something";
  EXPECT_EQ(through(listen), "hello\n") << "the proxy still relays";
}

TEST_F(Toxiproxy, ToxicsAreFaultsStatusAbortAllAndTheKillFileEndThem) {
  start_faultd();
  const uint16_t port = toxiproxy_port();
  ASSERT_NE(port, 0) << faultd().err();
  const std::string listen = make_proxy();
  ASSERT_EQ(through(listen), "hello\n");
  ASSERT_EQ(http(port, "POST", "/proxies/web/toxics", R"({"type":"timeout","attributes":{"timeout":0}})").status, 200);
  EXPECT_EQ(through(listen), "") << "timeout 0 holds the data";

  // faultctl status (through faultd) lists the proxy and its toxic.
  const CommandResult st = faultctl({"status", "--json"}, true);
  ASSERT_TRUE(st.status.is(0)) << st.describe();
  const nlohmann::json doc = nlohmann::json::parse(st.out, nullptr, false);
  ASSERT_TRUE(doc.is_object() && doc.contains("proxies")) << st.out;
  EXPECT_EQ(doc["proxies"][0]["name"], "web") << st.out;
  EXPECT_EQ(doc["proxies"][0]["toxics"][0]["type"], "timeout") << st.out;
  EXPECT_GT(doc["proxies"][0]["toxics"][0]["left_s"].get<int>(), 3500) << "bounded by the default hour: " << st.out;
  const CommandResult text = faultctl({"status"}, true);
  EXPECT_NE(text.out.find("PROXIES"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("toxic timeout_downstream: timeout downstream"), std::string::npos) << text.out;

  // abort --all ends it (and takes the proxy down no more).
  const CommandResult all = faultctl({"abort", "--all"}, true);
  EXPECT_TRUE(all.status.is(0)) << all.describe();
  EXPECT_NE(all.out.find("1 proxy faults ended"), std::string::npos) << all.describe();
  EXPECT_EQ(http(port, "GET", "/proxies/web/toxics").body, "[]\n");
  EXPECT_EQ(through(listen), "hello\n");

  // The kill file: the toxics go within a second, and none starts while it exists.
  ASSERT_EQ(http(port, "POST", "/proxies/web/toxics", R"({"type":"timeout"})").status, 200);
  ASSERT_EQ(http(port, "POST", "/proxies/web", R"({"enabled":false})").status, 200);
  const std::string kill = dir() + "/run/kill";  // <FAULTLINE_RUN_DIR>/kill, the default kill file
  std::filesystem::create_directories(dir() + "/run");
  std::ofstream(kill) << "";
  const auto t0 = std::chrono::steady_clock::now();
  bool ended = false;
  while (std::chrono::steady_clock::now() - t0 < 2s && !ended) {
    const nlohmann::json p = json_of(http(port, "GET", "/proxies/web"));
    ended = p.is_object() && p["toxics"].empty() && p["enabled"] == true;
    if (!ended) std::this_thread::sleep_for(20ms);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_TRUE(ended) << "the kill file did not end the proxy's faults: " << http(port, "GET", "/proxies/web").body;
  EXPECT_LE(took.count(), 1000);
  std::printf("[ measure  ] kill file to every proxy fault ended: %lld ms\n", static_cast<long long>(took.count()));
  const TcpReply refused = http(port, "POST", "/proxies/web/toxics", R"({"type":"latency"})");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(json_of(refused).value("error", "").find("no fault may start"), std::string::npos) << refused.body;
  EXPECT_EQ(http(port, "POST", "/proxies/web", R"({"enabled":false})").status, 403);
  EXPECT_EQ(http(port, "GET", "/proxies/web/toxics").status, 200) << "reading is still allowed";
  std::filesystem::remove(kill);
  EXPECT_EQ(http(port, "POST", "/proxies/web/toxics", R"({"type":"latency"})").status, 200)
      << "faults start again once the kill file is gone";
}

TEST_F(Toxiproxy, AToxicEndsAtItsBoundAndMetricsCountTheProxy) {
  start_faultd({"--toxic-max-duration", "1s"});
  const uint16_t port = toxiproxy_port();
  ASSERT_NE(port, 0) << faultd().err();
  const std::string listen = make_proxy();
  ASSERT_EQ(http(port, "POST", "/proxies/web/toxics", R"({"type":"noop"})").status, 200);
  ASSERT_EQ(through(listen), "hello\n");
  std::this_thread::sleep_for(1600ms);
  EXPECT_EQ(http(port, "GET", "/proxies/web/toxics").body, "[]\n") << faultd().err();
  (void)faultd().wait_for("reached its bound", 2s, fltest::Stream::kStderr);
  EXPECT_NE(faultd().err().find("proxy web: toxic noop_downstream ended: it reached its bound of 1s"),
            std::string::npos)
      << faultd().err();

  const TcpReply m = http(metrics_port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const std::string& line :
       {std::string("faultline_proxy_up{proxy=\"web\"} 1"),
        std::string("faultline_proxy_connections_accepted_total{proxy=\"web\"} 1"),
        std::string("faultline_proxy_bytes_total{proxy=\"web\",direction=\"upstream\"} 4"),
        std::string("faultline_proxy_bytes_total{proxy=\"web\",direction=\"downstream\"} 6")}) {
    EXPECT_NE(m.body.find(line + "\n"), std::string::npos) << line << "\n" << m.body;
  }
}

}  // namespace
}  // namespace fldaemon
