// Toxiproxy's acceptance, row by row: each request with the status and error
// Toxiproxy 2.12 gives (read from its api.go, proxy.go, proxy_collection.go,
// toxic_collection.go and toxics/*.go), sent to faultd and compared; then an
// upstream that does not resolve yet (closed after accept, counted, logged),
// and the compose-style scenario: proxies first, a real redis-server after.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "faultd_env.h"
#include "hello_server.h"

namespace fldaemon {
namespace {

using json = nlohmann::json;

using CompatUpstream = fltest::HelloServer;

uint16_t port_of(const std::string& hostport) {
  return static_cast<uint16_t>(std::stoi(hostport.substr(hostport.rfind(':') + 1)));
}

// "ping" to 127.0.0.1:port; what came back before the close ("" if nothing).
std::string ping_through(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string got;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    (void)!::send(fd, "ping", 4, MSG_NOSIGNAL);
    char b[64];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) break;
      const ssize_t n = ::recv(fd, b, sizeof b, 0);
      if (n <= 0) break;
      got.append(b, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return got;
}

// A loopback port nobody listens on now (bound, read, released).
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  (void)::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Toxiproxy's decoder errors ("bad request body: json: cannot unmarshal ...")
// are Go's text: a row marked kDecoder compares the status and this prefix.
constexpr const char* kDecoder = "bad request body: ";

struct Row {
  std::string method, path, body;
  int status;         // what Toxiproxy answers
  std::string error;  // its whole "error" (or kDecoder: the prefix); empty on success
  json subset;        // on success: members the answer must have (null: not checked)
  std::string why;    // where Toxiproxy decides it
};

class ToxiproxyCompat : public FaultdTest {
 protected:
  [[nodiscard]] TcpReply api(const std::string& method, const std::string& path, const std::string& body = "") {
    return http(toxiproxy_port(), method, path, body);
  }
};

// Whether `got` has every member of `want` (recursively through objects and
// arrays of the same length; other values compared whole).
bool has_subset(const json& got, const json& want) {
  if (want.is_array()) {
    if (!got.is_array() || got.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
      if (!has_subset(got[i], want[i])) return false;
    return true;
  }
  if (!want.is_object()) return got == want;
  if (!got.is_object()) return false;
  for (const auto& [k, v] : want.items())
    if (!got.contains(k) || !has_subset(got[k], v)) return false;
  return true;
}

TEST_F(ToxiproxyCompat, EveryRowAnswersAsToxiproxyDoes) {
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  CompatUpstream upstream;
  const std::string up = "127.0.0.1:" + std::to_string(upstream.port());
  const TcpReply made = api("POST", "/proxies", R"({"name":"web","listen":"127.0.0.1:0","upstream":")" + up + "\"}");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string web_listen = json::parse(made.body)["listen"];

  const json none;  // success rows that check the status only
  const std::vector<Row> rows = {
      // --- proxies: create (ProxyCreate, ProxyCollection.Add, Proxy.Start)
      {"POST", "/proxies", "{}", 400, "missing required field: name", none, "ProxyCreate: len(Name) < 1"},
      {"POST", "/proxies", R"({"name":"x"})", 400, "missing required field: upstream", none, "len(Upstream) < 1"},
      {"POST", "/proxies", "", 400, "bad request body: EOF", none, "Decode on an empty body"},
      {"POST", "/proxies", "not json", 400, kDecoder, none, "Decode: invalid character"},
      {"POST", "/proxies", R"({"name":5,"upstream":"a:1"})", 400, kDecoder, none, "Decode: number into string"},
      {"POST", "/proxies", R"({"name":"x","upstream":")" + up + R"(","enabled":"yes"})", 400, kDecoder, none,
       "Decode: string into bool"},
      {"POST", "/proxies", R"({"name":"web","listen":"127.0.0.1:0","upstream":")" + up + "\"}", 409,
       "proxy already exists", none, "Collection.Add"},
      {"POST", "/proxies",
       R"({"name":"extra","listen":"127.0.0.1:0","upstream":")" + up +
           R"(","colour":"red","toxics":[{"type":"latency"}]})",
       201, "", json{{"name", "extra"}, {"toxics", json::array()}}, "unknown members and toxics (json:\"-\") ignored"},
      {"POST", "/proxies", R"({"name":"later","listen":"127.0.0.1:0","upstream":"somehost:12345"})", 201, "",
       json{{"upstream", "somehost:12345"}, {"enabled", true}}, "the upstream is not resolved until a connection"},
      {"POST", "/proxies", R"({"name":"nowhere","listen":"127.0.0.1:0","upstream":"nonsense"})", 201, "",
       json{{"upstream", "nonsense"}}, "the upstream is not judged at all"},
      {"POST", "/proxies", R"({"name":"badlisten","listen":"nonsense","upstream":")" + up + "\"}", 500, "", none,
       "net.Listen's error, not an ApiError: 500"},
      {"POST", "/proxies", R"({"name":"off","listen":"127.0.0.1:0","upstream":")" + up + R"(","enabled":false})", 201,
       "", json{{"enabled", false}}, "Add(proxy, start=false)"},
      // --- proxies: show, update, delete
      {"GET", "/proxies/nope", "", 404, "proxy not found", none, "Collection.Get"},
      {"GET", "/proxies/web", "", 200, "", json{{"name", "web"}, {"upstream", up}}, "ProxyShow"},
      {"POST", "/proxies/web", R"({"name":"other"})", 200, "", json{{"name", "web"}}, "Update ignores the name"},
      {"PATCH", "/proxies/web", R"({"upstream":"somehost:12345"})", 200, "", json{{"upstream", "somehost:12345"}},
       "Update: upstream stored, not resolved"},
      {"PATCH", "/proxies/web", R"({"upstream":")" + up + R"(","toxics":[]})", 200, "", json{{"upstream", up}},
       "Update; toxics ignored"},
      {"PATCH", "/proxies/web", R"({"enabled":"no"})", 400, kDecoder, none, "Decode: string into bool"},
      {"PATCH", "/proxies/web", "[]", 400, kDecoder, none, "Decode: array into Proxy"},
      {"PATCH", "/proxies/nope", "{}", 404, "proxy not found", none, "Collection.Get first"},
      {"PATCH", "/proxies/off", R"({"enabled":true})", 200, "", json{{"enabled", true}}, "start"},
      {"PATCH", "/proxies/off", R"({"enabled":false})", 200, "", json{{"enabled", false}}, "stop"},
      {"DELETE", "/proxies/nope", "", 404, "proxy not found", none, "Collection.Remove"},
      {"DELETE", "/proxies/extra", "", 204, "", none, "ProxyDelete"},
      // --- populate (PopulateJson, AddOrReplace)
      {"POST", "/populate", "{}", 400, kDecoder, none, "Decode: object into []struct"},
      {"POST", "/populate", R"([{"name":"b"}])", 400, "missing required field: upstream at proxy 1", none,
       "PopulateJson checks every proxy first"},
      {"POST", "/populate", R"([{"upstream":")" + up + "\"}]", 400, "missing required field: name at proxy 1", none,
       "PopulateJson"},
      {"POST", "/populate", R"([{"name":"p1","upstream":")" + up + R"("},{"name":"p1","upstream":")" + up + "\"}]", 201,
       "", none, "a name twice: AddOrReplace keeps the same one"},
      {"POST", "/populate", R"([{"name":"p2","upstream":")" + up + R"(","enabled":false}])", 201, "",
       json{{"proxies",
             json::array({json{{"name", "p2"}, {"enabled", false}, {"upstream", up}, {"toxics", json::array()}}})}},
       "enabled is read (nil: true)"},
      {"POST", "/populate", R"([{"name":"p1","upstream":")" + up + "\"}]", 201, "", none,
       "the same listen and upstream: kept"},
      // --- toxics: create (AddToxicJson)
      {"POST", "/proxies/nope/toxics", R"({"type":"latency"})", 404, "proxy not found", none, "ToxicCreate"},
      {"POST", "/proxies/web/toxics", R"({"type":"sideways"})", 400, "invalid toxic type", none, "toxics.New nil"},
      {"POST", "/proxies/web/toxics", R"({"attributes":{}})", 400, "invalid toxic type", none, "type \"\""},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","stream":"sideways"})", 400,
       "stream was invalid, can be either upstream or downstream", none, "ParseDirection"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","stream":""})", 400,
       "stream was invalid, can be either upstream or downstream", none, "ParseDirection(\"\")"},
      {"POST", "/proxies/web/toxics", R"({"type":5})", 400, kDecoder, none, "Decode: number into string"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","stream":5})", 400, kDecoder, none,
       "Decode: number into string"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","attributes":{"latency":1.5}})", 400, kDecoder, none,
       "Decode: 1.5 into int64"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","attributes":{"latency":"50"}})", 400, kDecoder, none,
       "Decode: string into int64"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","toxicity":"all"})", 400, kDecoder, none,
       "Decode: string into float32"},
      {"POST", "/proxies/web/toxics",
       R"({"type":"slicer","attributes":{"average_size":1000,"size_variation":1000,"delay":1000}})", 200, "",
       json{{"name", "slicer_downstream"},
            {"attributes", {{"average_size", 1000}, {"size_variation", 1000}, {"delay", 1000}}}},
       "slicer: no check on the sizes"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","attributes":{"latency":-5}})", 200, "",
       json{{"name", "latency_downstream"}, {"attributes", {{"latency", -5}, {"jitter", 0}}}},
       "no attribute is judged; a negative latency waits nothing"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency"})", 409, "toxic already exists", none,
       "findToxicByName(latency_downstream)"},
      {"POST", "/proxies/web/toxics", R"({"type":"latency","name":"latency_downstream","attributes":{"latency":"x"}})",
       409, "toxic already exists", none, "the name is checked before the attributes decode"},
      {"POST", "/proxies/web/toxics",
       R"({"type":"bandwidth","stream":"UPSTREAM","toxicity":1.5,"attributes":{"rate":-1,"colour":1}})", 200, "",
       json{{"name", "bandwidth_UPSTREAM"}, {"type", "bandwidth"}, {"toxicity", 1.5}, {"attributes", {{"rate", -1}}}},
       "stream case-free; name from the stream as given; toxicity unchecked; unknown attribute ignored"},
      {"POST", "/proxies/web/toxics", R"({"type":"timeout","name":"t0","toxicity":0,"attributes":{"timeout":0}})", 200,
       "", json{{"toxicity", 0}}, "toxicity 0 is a toxic that never applies"},
      {"POST", "/proxies/web/toxics", R"({"type":"reset_peer","name":"rp","stream":"upstream","toxicity":0})", 200, "",
       json{{"stream", "upstream"}, {"attributes", {{"timeout", 0}}}}, "attributes default to 0"},
      {"POST", "/proxies/web/toxics", R"({"type":"limit_data","name":"ld","toxicity":0,"attributes":{"bytes":-1}})",
       200, "", json{{"attributes", {{"bytes", -1}}}}, "negative limit"},
      {"POST", "/proxies/web/toxics", R"({"type":"slow_close","name":"sc","attributes":{"delay":-1}})", 200, "", none,
       "negative delay"},
      {"POST", "/proxies/web/toxics", R"({"type":"noop","name":"n","extra":true,"attributes":null})", 200, "",
       json{{"name", "n"}, {"attributes", json::object()}}, "unknown members ignored, null attributes"},
      // --- toxics: show, update (UpdateToxicJson reads attributes and toxicity only), delete
      {"GET", "/proxies/web/toxics/nope", "", 404, "toxic not found", none, "ToxicShow"},
      {"GET", "/proxies/nope/toxics/nope", "", 404, "proxy not found", none, "proxy first"},
      {"GET", "/proxies/web/toxics/slicer_downstream", "", 200, "", json{{"type", "slicer"}}, "ToxicShow"},
      {"PATCH", "/proxies/web/toxics/latency_downstream", R"({"attributes":{"latency":10}})", 200, "",
       json{{"attributes", {{"latency", 10}, {"jitter", 0}}}}, "attributes merged"},
      {"PATCH", "/proxies/web/toxics/latency_downstream",
       R"({"type":"bandwidth","stream":"upstream","name":"zzz","toxicity":0.5})", 200, "",
       json{{"name", "latency_downstream"}, {"type", "latency"}, {"stream", "downstream"}, {"toxicity", 0.5}},
       "type, stream and name ignored"},
      {"POST", "/proxies/web/toxics/latency_downstream", R"({"attributes":{"latency":"x"}})", 400, kDecoder, none,
       "Decode: string into int64"},
      {"PATCH", "/proxies/web/toxics/nope", "{}", 404, "toxic not found", none, "UpdateToxicJson"},
      {"PATCH", "/proxies/nope/toxics/x", "{}", 404, "proxy not found", none, "proxy first"},
      {"DELETE", "/proxies/web/toxics/nope", "", 404, "toxic not found", none, "RemoveToxic"},
      {"DELETE", "/proxies/web/toxics/n", "", 204, "", none, "ToxicDelete"},
      {"GET", "/proxies/web/toxics", "", 200, "", none, "ToxicIndex"},
      // --- the rest
      {"POST", "/reset", "", 204, "", none, "ResetState: every proxy started, every toxic gone"},
      {"GET", "/proxies/off", "", 200, "", json{{"enabled", true}, {"toxics", json::array()}}, "after /reset"},
      {"GET", "/version", "", 200, "", json{{"version", "2.12.0"}}, "Version"},
  };
  ASSERT_GE(rows.size(), 40u);
  size_t matched = 0;
  for (const Row& r : rows) {
    const TcpReply got = api(r.method, r.path, r.body);
    const json j = json::parse(got.body, nullptr, false);
    bool ok = got.status == r.status;
    if (ok && r.status >= 400) {
      ok = j.is_object() && j.value("status", 0) == r.status;
      if (ok && !r.error.empty()) {
        const std::string e = j.value("error", "");
        ok = r.error == kDecoder ? e.rfind(kDecoder, 0) == 0 : e == r.error;
      }
    } else if (ok && !r.subset.is_null()) {
      ok = has_subset(j, r.subset);
    }
    EXPECT_TRUE(ok) << r.method << " " << r.path << " " << r.body << "\n  Toxiproxy: " << r.status << " "
                    << (r.error.empty() ? r.subset.dump() : r.error) << " (" << r.why
                    << ")\n  faultd:    " << got.status << " " << got.body;
    matched += ok ? 1 : 0;
  }
  std::printf("[ measure  ] %zu of %zu rows answer as Toxiproxy does\n", matched, rows.size());
  // Listen host:0 shows the port bound; the toxics with toxicity 0 let data through.
  EXPECT_NE(port_of(web_listen), 0);
  EXPECT_EQ(ping_through(port_of(web_listen)), "hello\n");
}

// An upstream that does not resolve is accepted and stored; each connection is
// then accepted and closed (as Toxiproxy's dial failure closes it), counted
// in /metrics and logged with the reason; once the upstream is set to one
// that resolves (a name too: localhost), connections go through.
TEST_F(ToxiproxyCompat, AnUnresolvableUpstreamIsClosedAfterAcceptCountedAndLogged) {
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  CompatUpstream upstream;
  const TcpReply made =
      api("POST", "/proxies", R"({"name":"later","listen":"127.0.0.1:0","upstream":"somehost.invalid:12345"})");
  ASSERT_EQ(made.status, 201) << made.body;
  const uint16_t port = port_of(json::parse(made.body)["listen"]);
  EXPECT_EQ(ping_through(port), "") << "accepted, then closed";
  EXPECT_TRUE(faultd().wait_for("could not be reached: cannot resolve somehost.invalid", 3s, fltest::Stream::kStderr))
      << faultd().err();
  const TcpReply m = http(metrics_port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("faultline_proxy_upstream_failures_total{proxy=\"later\",reason=\"resolve\"} 1\n"),
            std::string::npos)
      << m.body;

  // A refused upstream is the other reason.
  ASSERT_EQ(api("PATCH", "/proxies/later", R"({"upstream":"127.0.0.1:)" + std::to_string(free_port()) + "\"}").status,
            200);
  const uint16_t port2 = port_of(json::parse(api("GET", "/proxies/later").body)["listen"]);
  EXPECT_EQ(ping_through(port2), "");
  EXPECT_TRUE(faultd().wait_for("Connection refused", 3s, fltest::Stream::kStderr)) << faultd().err();

  // A name that resolves, per connection.
  ASSERT_EQ(
      api("PATCH", "/proxies/later", R"({"upstream":"localhost:)" + std::to_string(upstream.port()) + "\"}").status,
      200);
  const uint16_t port3 = port_of(json::parse(api("GET", "/proxies/later").body)["listen"]);
  EXPECT_EQ(ping_through(port3), "hello\n") << faultd().err();
}

// Compose-style: the proxies are made before their upstream exists (the CI
// job's order), then redis-server starts on a private port and data dir, and
// redis-benchmark through the proxy works, a slicer whose variation equals its
// average size on the replies (Toxiproxy's client suite uses that slicer).
TEST_F(ToxiproxyCompat, ProxiesFirstThenRedisThenBenchmarkThroughTheProxy) {
  if (!std::filesystem::exists("/usr/bin/redis-server") || !std::filesystem::exists("/usr/bin/redis-benchmark"))
    GTEST_SKIP() << "redis-server and redis-tools are not installed: run scripts/install-deps.sh";
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  const uint16_t redis_port = free_port();
  const TcpReply made =
      api("POST", "/populate",
          R"([{"name":"redis","listen":"127.0.0.1:0","upstream":"localhost:)" + std::to_string(redis_port) + R"("}])");
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string listen = json::parse(made.body)["proxies"][0]["listen"];
  ASSERT_EQ(api("POST", "/proxies/redis/toxics",
                R"({"type":"slicer","attributes":{"average_size":1000,"size_variation":1000,"delay":100}})")
                .status,
            200);
  EXPECT_EQ(ping_through(port_of(listen)), "") << "no redis yet: accepted and closed";

  const std::string data = dir() + "/redis";
  std::filesystem::create_directories(data);
  fltest::SpawnOptions o;
  o.merge_stderr = true;
  ChildProcess redis =
      ChildProcess::spawn({"/usr/bin/redis-server", "--bind", "127.0.0.1", "--port", std::to_string(redis_port),
                           "--dir", data, "--save", "", "--appendonly", "no", "--protected-mode", "yes"},
                          o);
  ASSERT_TRUE(redis.wait_for("Ready to accept connections", 10s)) << "redis-server did not start";
  const CommandResult bench =
      fltest::run_command({"/usr/bin/redis-benchmark", "-h", "127.0.0.1", "-p", std::to_string(port_of(listen)), "-q",
                           "-n", "2000", "-t", "set,get,ping", "-d", "3000"},
                          {}, 60s);
  std::printf("%s", bench.out.c_str());
  EXPECT_TRUE(bench.status.is(0)) << bench.describe();
  EXPECT_NE(bench.out.find("GET:"), std::string::npos) << bench.describe();
  EXPECT_EQ(bench.out.find("rror"), std::string::npos) << bench.describe();
  redis.stop();
  std::filesystem::remove_all(data);
}

}  // namespace
}  // namespace fldaemon
