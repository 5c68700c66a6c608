// HTTP toxics on faultd's Toxiproxy proxies (a Faultline extension): a toxic
// of type http_* or llm_* in Toxiproxy's envelope faults single requests,
// proven with real curl against a real HTTP server (python3) through a real
// faultd; bad attributes refused by name with nothing changed; the official
// Anthropic SDK meets llm_* toxics (selftests/llm/toxiproxy_sdk_test.js).
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "faultd_env.h"

namespace fldaemon {
namespace {

// python3's ThreadingHTTPServer on 127.0.0.1 (a free port): GET answers
// "hello PATH"; each request printed as "REQ METHOD PATH". With CERT KEY it
// serves TLS; with a third file CLIENT_CA it requires a client certificate
// signed by it.
constexpr const char* kToxicUpstreamScript = R"PY(
import http.server, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        print("REQ", self.command, self.path, flush=True)
        body = ("hello " + self.path).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) > 2:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    if len(sys.argv) > 3:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(sys.argv[3])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("PORT", srv.server_address[1], flush=True)
srv.serve_forever()
)PY";

class ToxicUpstream {
 public:
  // tls: {cert, key} or {cert, key, client_ca} files; none: plain HTTP.
  explicit ToxicUpstream(const std::string& dir, const std::vector<std::string>& tls = {}) {
    const std::string script = dir + "/toxic_upstream.py";
    std::ofstream(script) << kToxicUpstreamScript;
    std::vector<std::string> argv = {"python3", script};
    argv.insert(argv.end(), tls.begin(), tls.end());
    child_.emplace(ChildProcess::spawn(argv, {.merge_stderr = true}));
    if (auto line = child_->wait_line_starting("PORT ", 10s)) port_ = static_cast<uint16_t>(std::stoi(line->substr(5)));
  }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] bool started() const { return port_ != 0; }
  [[nodiscard]] int requests() {
    const std::string& out = child_->out();
    int n = 0;
    for (size_t at = out.find("REQ "); at != std::string::npos; at = out.find("REQ ", at + 1)) ++n;
    return n;
  }
  [[nodiscard]] std::string describe() { return child_->describe(); }

 private:
  std::optional<ChildProcess> child_;
  uint16_t port_ = 0;
};

struct Curl {
  int exit = -1;
  int status = 0;
  std::string body;
};

// curl URL: its exit code, the status it got and the body.
Curl curl_get(const std::string& url, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {"curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", url};
  argv.insert(argv.begin() + 1, extra.begin(), extra.end());
  const CommandResult r = fltest::run_command(argv, {}, 20s);
  Curl c;
  c.exit = r.status.exited ? r.status.code : -1;
  const size_t nl = r.out.rfind('\n');
  if (nl != std::string::npos) {
    c.body = r.out.substr(0, nl);
    c.status = std::atoi(r.out.c_str() + nl + 1);
  }
  return c;
}

class ToxiproxyHttp : public FaultdTest {
 protected:
  // A proxy "web" in front of `upstream`; its listen address.
  std::string make_proxy(const std::string& upstream) {
    const TcpReply r = http(toxiproxy_port(), "POST", "/proxies",
                            R"({"name":"web","listen":"127.0.0.1:0","upstream":")" + upstream + "\"}");
    EXPECT_EQ(r.status, 201) << r.body;
    return nlohmann::json::parse(r.body, nullptr, false).value("listen", "");
  }
};

TEST_F(ToxiproxyHttp, CurlMeetsHttpToxicsAndFirstNIsCounted) {
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  ToxicUpstream up(dir());
  ASSERT_TRUE(up.started()) << up.describe();
  const std::string listen = make_proxy(up.address());
  const std::string base = "http://" + listen;

  // The first 2 GETs under /api answer 503; every later one, and every other
  // path, reaches the upstream.
  const TcpReply made = http(toxiproxy_port(), "POST", "/proxies/web/toxics",
                             R"({"type":"http_status","attributes":{"status":503,"body":"down","path":"/api",
                                 "method":"GET","first_n":2}})");
  ASSERT_EQ(made.status, 200) << made.body;
  const auto toxic = nlohmann::json::parse(made.body);
  EXPECT_EQ(toxic["name"], "http_status_downstream");
  EXPECT_EQ(toxic["stream"], "downstream");
  EXPECT_EQ(toxic["toxicity"], 1.0);
  EXPECT_EQ(toxic["attributes"]["first_n"], 2);
  EXPECT_EQ(toxic["attributes"]["path"], "/api");

  const Curl other = curl_get(base + "/other");
  EXPECT_EQ(other.status, 200) << "a path the toxic does not match passes, and is not counted";
  for (int i = 0; i < 2; ++i) {
    const Curl c = curl_get(base + "/api/items");
    EXPECT_EQ(c.status, 503) << "request " << i + 1;
    EXPECT_EQ(c.body, "down");
  }
  for (int i = 0; i < 2; ++i) {
    const Curl c = curl_get(base + "/api/items");
    EXPECT_EQ(c.status, 200) << "past first_n, request " << i + 3 << " passes";
    EXPECT_EQ(c.body, "hello /api/items");
  }
  EXPECT_EQ(up.requests(), 3) << "the 2 faulted requests never reached the upstream";

  // Listed with the proxy's toxics in Toxiproxy's envelope; /http_faults does not show it.
  const auto list = nlohmann::json::parse(http(toxiproxy_port(), "GET", "/proxies/web/toxics").body);
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["type"], "http_status");
  EXPECT_EQ(http(toxiproxy_port(), "GET", "/proxies/web/http_faults").body, "[]\n");
  const auto proxy = nlohmann::json::parse(http(toxiproxy_port(), "GET", "/proxies/web").body);
  EXPECT_EQ(proxy["toxics"].size(), 1u) << proxy.dump();

  // An update that changes first_n counts again: one more 503.
  const TcpReply upd =
      http(toxiproxy_port(), "POST", "/proxies/web/toxics/http_status_downstream", R"({"attributes":{"first_n":1}})");
  ASSERT_EQ(upd.status, 200) << upd.body;
  EXPECT_EQ(curl_get(base + "/api/x").status, 503);
  EXPECT_EQ(curl_get(base + "/api/x").status, 200);

  // Removed like any toxic: every request passes.
  EXPECT_EQ(http(toxiproxy_port(), "DELETE", "/proxies/web/toxics/http_status_downstream").status, 204);
  EXPECT_EQ(http(toxiproxy_port(), "GET", "/proxies/web/toxics").body, "[]\n");

  // A delay (stream upstream: the request waits) and a cut response.
  ASSERT_EQ(http(toxiproxy_port(), "POST", "/proxies/web/toxics",
                 R"({"type":"http_delay","stream":"upstream","attributes":{"delay":400,"path":"/slow"}})")
                .status,
            200);
  ASSERT_EQ(http(toxiproxy_port(), "POST", "/proxies/web/toxics",
                 R"({"type":"http_truncate","attributes":{"bytes":3,"path":"/cut"}})")
                .status,
            200);
  const auto t0 = std::chrono::steady_clock::now();
  const Curl slow = curl_get(base + "/slow");
  const auto slow_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(slow.status, 200);
  EXPECT_GE(slow_ms, 400) << "the request waited the delay";
  const Curl cut = curl_get(base + "/cut");
  EXPECT_EQ(cut.exit, 18) << "curl: the transfer ended short (3 bytes of the body, then a close)";
  EXPECT_EQ(http(toxiproxy_port(), "DELETE", "/proxies/web/toxics/http_delay_upstream").status, 204);
  EXPECT_EQ(http(toxiproxy_port(), "DELETE", "/proxies/web/toxics/http_truncate_downstream").status, 204);

  // An LLM preset and a reset, as a Toxiproxy client adds them.
  ASSERT_EQ(http(toxiproxy_port(), "POST", "/proxies/web/toxics",
                 R"({"name":"rl","type":"llm_rate_limit","stream":"upstream","attributes":{"retry_after":7,
                     "path":"/v1/messages"}})")
                .status,
            200);
  ASSERT_EQ(http(toxiproxy_port(), "POST", "/proxies/web/toxics",
                 R"({"name":"boom","type":"http_reset","attributes":{"path":"/boom"}})")
                .status,
            200);
  const Curl rl = curl_get(base + "/v1/messages", {"-i"});
  EXPECT_EQ(rl.status, 429) << rl.body;
  EXPECT_NE(rl.body.find("retry-after: 7"), std::string::npos) << rl.body;
  EXPECT_NE(rl.body.find("\"rate_limit_error\""), std::string::npos) << "Anthropic's envelope (the path) " << rl.body;
  const Curl reset = curl_get(base + "/boom");
  EXPECT_EQ(reset.exit, 56) << "curl: the connection was reset";
  EXPECT_EQ(curl_get(base + "/fine").status, 200);

  // Counted in /metrics; listed in faultd's status; /reset removes them.
  const TcpReply metrics = http(metrics_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("faultline_proxy_http_fault_requests_total{proxy=\"web\",fault=\"rl\"} 1"),
            std::string::npos)
      << metrics.body;
  const CommandResult st = faultctl({"status"}, true);
  EXPECT_NE(st.out.find("toxic rl: llm_rate_limit upstream"), std::string::npos) << st.out;
  EXPECT_EQ(http(toxiproxy_port(), "POST", "/reset").status, 204);
  EXPECT_EQ(http(toxiproxy_port(), "GET", "/proxies/web/toxics").body, "[]\n");
  EXPECT_EQ(curl_get(base + "/v1/messages").status, 200);
}

TEST_F(ToxiproxyHttp, BadHttpToxicsAreRefusedByNameAndChangeNothing) {
  start_faultd();
  const uint16_t port = toxiproxy_port();
  ASSERT_NE(port, 0) << faultd().err();
  ASSERT_EQ(http(port, "POST", "/proxies", R"({"name":"web","upstream":"127.0.0.1:9"})").status, 201);
  ASSERT_EQ(
      http(port, "POST", "/proxies/web/toxics", R"({"name":"lat","type":"latency","attributes":{"latency":5}})").status,
      200);
  ASSERT_EQ(
      http(port, "POST", "/proxies/web/toxics", R"({"name":"s","type":"http_status","attributes":{"status":503}})")
          .status,
      200);
  const std::string before = http(port, "GET", "/proxies/web/toxics").body;
  struct Case {
    std::string method, path, body;
    int status;
    std::string error;
  };
  const Case cases[] = {
      {"POST", "/proxies/web/toxics", R"({"type":"http_status"})", 400,
       "bad request body: toxic: \"attributes.status\": missing (100..599)"},
      {"POST", "/proxies/web/toxics", R"({"type":"http_status","attributes":{"status":42}})", 400,
       "bad request body: toxic: \"attributes.status\": must be 100..599, got 42"},
      {"POST", "/proxies/web/toxics", R"({"type":"http_reset","attributes":{"latency":5}})", 400,
       "bad request body: toxic: \"attributes.latency\": not an attribute of http_reset (host, method, path, "
       "match_headers, first_n, attempts)"},
      {"POST", "/proxies/web/toxics", R"({"type":"http_reset","attributes":{"first_n":-2}})", 400,
       "bad request body: toxic: \"attributes.first_n\": must be 0..1000000000, got -2"},
      {"POST", "/proxies/web/toxics", R"({"type":"http_reset","attributes":{"path":"api"}})", 400,
       "bad request body: toxic: \"attributes.path\": must start with / (a prefix or a glob), got \"api\""},
      {"POST", "/proxies/web/toxics", R"({"type":"llm_melted"})", 400, "invalid toxic type"},
      {"POST", "/proxies/web/toxics", R"({"type":"http_reset","stream":"sideways"})", 400,
       "stream was invalid, can be either upstream or downstream"},
      {"POST", "/proxies/web/toxics", R"({"name":"lat","type":"http_reset"})", 409, "toxic already exists"},
      {"POST", "/proxies/web/toxics", R"({"name":"s","type":"latency"})", 409, "toxic already exists"},
      {"POST", "/proxies/web/toxics/s", R"({"attributes":{"status":"x"}})", 400,
       "bad request body: toxic: \"attributes.status\": must be a number, got string"},
      {"POST", "/proxies/web/toxics/s", R"({"toxicity":"all"})", 400,
       "bad request body: toxic: \"toxicity\": must be a number, got \"all\""},
      {"GET", "/proxies/web/http_faults/s", "", 404, "http fault not found"},
      {"DELETE", "/proxies/web/http_faults/s", "", 404, "http fault not found"},
  };
  for (const Case& c : cases) {
    const TcpReply r = http(port, c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.path << " " << c.body << ": " << r.body;
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.is_object() ? j.value("error", "") : r.body, c.error) << c.method << " " << c.path << " " << c.body;
    if (j.is_object()) EXPECT_EQ(j.value("status", 0), c.status) << "Toxiproxy's envelope";
  }
  EXPECT_EQ(http(port, "GET", "/proxies/web/toxics").body, before) << "a refused request changed the toxics";
}

// Test certificates with openssl(1): an upstream CA and its leaf for
// 127.0.0.1 (serverAuth), a CA the upstream does not chain to, and a client CA
// with a client leaf (clientAuth) for mTLS. Empty on success, else why not.
std::string make_test_certificates(const std::string& dir) {
  const std::string script = R"SH(
set -e
mkdir -p "$1" && cd "$1"
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
for ca in up-ca wrong-ca client-ca; do
  openssl req -x509 $ec -keyout $ca.key -out $ca.pem -subj /CN=fl-test-$ca -days 2 2>/dev/null
done
leaf() {
  openssl req $ec -keyout $1.key -out $1.csr -subj /CN=fl-test-$1 2>/dev/null
  printf "$3" > $1.ext
  openssl x509 -req -in $1.csr -CA $2.pem -CAkey $2.key -CAcreateserial -out $1.pem -days 2 -extfile $1.ext 2>/dev/null
}
leaf up up-ca 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'
leaf client client-ca 'extendedKeyUsage=clientAuth\n'
)SH";
  const CommandResult r = fltest::run_command({"bash", "-c", script, "certs", dir}, {}, 30s);
  return r.status.is(0) ? "" : r.describe();
}

// FAULTLINE_CA_DIR for the faultd a test starts (the local CA listen_tls mints with).
class ScopedCaDir {
 public:
  explicit ScopedCaDir(const std::string& dir) { ::setenv("FAULTLINE_CA_DIR", dir.c_str(), 1); }
  ~ScopedCaDir() { ::unsetenv("FAULTLINE_CA_DIR"); }
  ScopedCaDir(const ScopedCaDir&) = delete;
  ScopedCaDir& operator=(const ScopedCaDir&) = delete;
};

TEST_F(ToxiproxyHttp, TlsProxiesServeCurlVerifyTheirUpstreamAndRefuseAWrongCa) {
  const std::string certs = dir() + "/certs";
  ASSERT_EQ(make_test_certificates(certs), "");
  const std::string c = certs + "/";
  ScopedCaDir ca_dir(dir() + "/ca");
  start_faultd();
  const uint16_t api = toxiproxy_port();
  ASSERT_NE(api, 0) << faultd().err();
  ToxicUpstream tls_up(dir(), {c + "up.pem", c + "up.key"});
  ToxicUpstream mtls_up(dir(), {c + "up.pem", c + "up.key", c + "client-ca.pem"});
  ToxicUpstream plain_up(dir());
  ASSERT_TRUE(tls_up.started() && mtls_up.started() && plain_up.started()) << tls_up.describe();
  auto create = [&](const nlohmann::json& body) {
    const TcpReply r = http(api, "POST", "/proxies", body.dump());
    EXPECT_EQ(r.status, 201) << body.dump() << ": " << r.body;
    return nlohmann::json::parse(r.body, nullptr, false);
  };

  // TLS both ways: a leaf of the local CA towards curl, the upstream verified
  // against upstream_ca; HTTP toxics on the plaintext in between.
  const auto both = create({{"name", "both"},
                            {"upstream", tls_up.address()},
                            {"listen_tls", true},
                            {"upstream_tls", true},
                            {"upstream_ca", c + "up-ca.pem"}});
  EXPECT_EQ(both.value("listen_tls", nlohmann::json()), true) << both.dump();
  EXPECT_EQ(both.value("upstream_tls", nlohmann::json()), true) << both.dump();
  EXPECT_EQ(both.value("upstream_ca", ""), c + "up-ca.pem");
  const std::string both_url = "https://" + both.value("listen", "");
  const std::string local_ca = dir() + "/ca/ca.pem";
  const Curl ok = curl_get(both_url + "/a", {"--cacert", local_ca});
  EXPECT_EQ(ok.status, 200) << ok.body << "\nfaultd:\n" << faultd().err();
  EXPECT_EQ(ok.body, "hello /a");
  EXPECT_EQ(curl_get(both_url + "/a").exit, 60) << "a client that does not trust the local CA fails closed";
  ASSERT_EQ(http(api, "POST", "/proxies/both/toxics",
                 R"({"type":"http_status","attributes":{"status":503,"body":"tls down","first_n":1}})")
                .status,
            200);
  const Curl faulted = curl_get(both_url + "/b", {"--cacert", local_ca});
  EXPECT_EQ(faulted.status, 503) << faulted.body;
  EXPECT_EQ(faulted.body, "tls down");
  EXPECT_EQ(curl_get(both_url + "/b", {"--cacert", local_ca}).status, 200) << "first_n 1: the next passes";
  EXPECT_EQ(tls_up.requests(), 2);

  // A TLS upstream whose certificate does not chain to upstream_ca: refused,
  // said to the plain client (502 and why) and in faultd's log; nothing reaches it.
  const auto wrong = create(
      {{"name", "wrong"}, {"upstream", tls_up.address()}, {"upstream_tls", true}, {"upstream_ca", c + "wrong-ca.pem"}});
  const Curl refused = curl_get("http://" + wrong.value("listen", "") + "/c");
  EXPECT_EQ(refused.status, 502) << refused.body;
  EXPECT_NE(refused.body.find("upstream 127.0.0.1: certificate refused"), std::string::npos) << refused.body;
  EXPECT_TRUE(faultd().wait_for("the upstream " + tls_up.address() +
                                    " could not be reached: upstream 127.0.0.1: "
                                    "certificate refused",
                                10s, fltest::Stream::kStderr))
      << faultd().err();
  EXPECT_EQ(tls_up.requests(), 2) << "nothing reached the upstream that was refused";
  // Told the right CA (an update: the members given replace the current
  // ones), the next connection verifies and goes through.
  const TcpReply fixed = http(api, "POST", "/proxies/wrong", nlohmann::json{{"upstream_ca", c + "up-ca.pem"}}.dump());
  ASSERT_EQ(fixed.status, 200) << fixed.body;
  EXPECT_EQ(nlohmann::json::parse(fixed.body).value("upstream_ca", ""), c + "up-ca.pem");
  const Curl now_ok = curl_get("http://" + wrong.value("listen", "") + "/c");
  EXPECT_EQ(now_ok.status, 200) << now_ok.body;
  EXPECT_EQ(tls_up.requests(), 3);
  // The same through a TLS listener: curl hears a handshake failure.
  const auto wrong_tls = create({{"name", "wrong_tls"},
                                 {"upstream", tls_up.address()},
                                 {"listen_tls", true},
                                 {"upstream_tls", true},
                                 {"upstream_ca", c + "wrong-ca.pem"}});
  EXPECT_EQ(curl_get("https://" + wrong_tls.value("listen", "") + "/c", {"--cacert", local_ca}).exit, 35);

  // mTLS: the upstream asks for a client certificate; the proxy presents one.
  const auto mtls = create({{"name", "mtls"},
                            {"upstream", mtls_up.address()},
                            {"upstream_tls", true},
                            {"upstream_ca", c + "up-ca.pem"},
                            {"client_cert", c + "client.pem"},
                            {"client_key", c + "client.key"}});
  const Curl m = curl_get("http://" + mtls.value("listen", "") + "/m");
  EXPECT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.body, "hello /m");
  const auto nocert = create(
      {{"name", "nocert"}, {"upstream", mtls_up.address()}, {"upstream_tls", true}, {"upstream_ca", c + "up-ca.pem"}});
  EXPECT_NE(curl_get("http://" + nocert.value("listen", "") + "/m").status, 200)
      << "without a client certificate the upstream refuses";
  EXPECT_EQ(mtls_up.requests(), 1);

  // A listener with a certificate of its own (files), a plain upstream.
  const auto files = create({{"name", "files"},
                             {"upstream", plain_up.address()},
                             {"listen_tls", {{"cert", c + "up.pem"}, {"key", c + "up.key"}}}});
  EXPECT_EQ(files["listen_tls"], (nlohmann::json{{"cert", c + "up.pem"}, {"key", c + "up.key"}}));
  const Curl f = curl_get("https://" + files.value("listen", "") + "/f", {"--cacert", c + "up-ca.pem"});
  EXPECT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(f.body, "hello /f");
  EXPECT_NE(curl_get("http://" + files.value("listen", "") + "/f").exit, 0) << "a TLS listener closes a plain client";

  // /populate reads the same members.
  const TcpReply pop =
      http(api, "POST", "/populate",
           nlohmann::json::array({{{"name", "pop"}, {"upstream", plain_up.address()}, {"listen_tls", true}}}).dump());
  ASSERT_EQ(pop.status, 201) << pop.body;
  const auto popped = nlohmann::json::parse(pop.body)["proxies"][0];
  EXPECT_EQ(popped.value("listen_tls", nlohmann::json()), true) << popped.dump();
  const Curl p = curl_get("https://" + popped.value("listen", "") + "/p", {"--cacert", local_ca});
  EXPECT_EQ(p.status, 200) << p.body;

  // Bad TLS members: refused by name, nothing made.
  struct Bad {
    nlohmann::json body;
    std::string error;  // the start of it
  };
  const Bad bad[] = {
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"listen_tls", {{"cert", "/nonexistent.pem"}, {"key", "/x"}}}},
       "listen_tls: cert /nonexistent.pem: not a readable PEM certificate chain"},
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"listen_tls", {{"cert", c + "up.pem"}}}},
       "listen_tls: give cert and key together"},
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"upstream_ca", c + "up-ca.pem"}},
       "upstream_ca: needs \"upstream_tls\": true"},
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"upstream_tls", true}, {"upstream_ca", "/nonexistent.pem"}},
       "upstream_tls: upstream_ca /nonexistent.pem: not a readable PEM file of certificates"},
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"upstream_tls", true}, {"client_cert", c + "client.pem"}},
       "upstream_tls: client_cert and client_key: give both or neither"},
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"upstream_tls", "yes"}},
       "bad request body: \"upstream_tls\" must be true or false"},
      {{{"name", "bad"}, {"upstream", "127.0.0.1:9"}, {"listen_tls", {{"colour", "red"}}}},
       "bad request body: \"listen_tls.colour\": unknown member (cert, key)"},
  };
  for (const Bad& b : bad) {
    const TcpReply r = http(api, "POST", "/proxies", b.body.dump());
    EXPECT_EQ(r.status, 400) << b.body.dump() << ": " << r.body;
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.value("error", "").rfind(b.error, 0), 0u) << b.body.dump() << ": " << r.body;
  }
  EXPECT_EQ(http(api, "GET", "/proxies/bad").status, 404);
}

// A restart (SIGHUP) hands a TLS proxy and its HTTP toxic to the new faultd:
// its TLS is made again from the members, and curl meets both.
TEST_F(ToxiproxyHttp, ATlsProxyAndItsHttpToxicSurviveARestart) {
  const std::string certs = dir() + "/certs";
  ASSERT_EQ(make_test_certificates(certs), "");
  const std::string c = certs + "/";
  ScopedCaDir ca_dir(dir() + "/ca");
  start_faultd({"--restart-drain", "5s"});
  const uint16_t api = toxiproxy_port();
  ASSERT_NE(api, 0) << faultd().err();
  ToxicUpstream up(dir(), {c + "up.pem", c + "up.key"});
  ASSERT_TRUE(up.started()) << up.describe();
  const nlohmann::json body{{"name", "tls"},
                            {"upstream", up.address()},
                            {"listen_tls", true},
                            {"upstream_tls", true},
                            {"upstream_ca", c + "up-ca.pem"}};
  const TcpReply made = http(api, "POST", "/proxies", body.dump());
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string url = "https://" + nlohmann::json::parse(made.body).value("listen", "");
  ASSERT_EQ(http(api, "POST", "/proxies/tls/toxics",
                 R"({"name":"down","type":"http_status","attributes":{"status":503,"path":"/down"}})")
                .status,
            200);
  const std::string local_ca = dir() + "/ca/ca.pem";
  ASSERT_EQ(curl_get(url + "/down", {"--cacert", local_ca}).status, 503);

  const pid_t old_pid = faultd().pid();
  ASSERT_EQ(::kill(old_pid, SIGHUP), 0);
  ASSERT_TRUE(faultd().wait_for("took over from the previous faultd", 20s, fltest::Stream::kStderr))
      << faultd().describe();
  auto code = faultd().wait(15s);  // the old one drains and exits
  ASSERT_TRUE(code && code->is(0)) << faultd().describe();
  const std::string& log = faultd().err();
  const size_t at = log.find("faultd: pid ");
  ASSERT_NE(at, std::string::npos) << log;
  const pid_t new_pid = std::stoi(log.substr(at + 12));
  // The new faultd is no child of ours: stopped here whatever an assertion does.
  struct StopAtEnd {
    pid_t pid;
    ~StopAtEnd() {
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(50ms);
    }
  } stop_new{new_pid};

  const auto after = nlohmann::json::parse(http(api, "GET", "/proxies/tls").body, nullptr, false);
  EXPECT_EQ(after.value("listen_tls", nlohmann::json()), true) << after.dump();
  EXPECT_EQ(after.value("upstream_ca", ""), c + "up-ca.pem") << after.dump();
  ASSERT_TRUE(after.contains("toxics") && after["toxics"].size() == 1u) << after.dump();
  EXPECT_EQ(after["toxics"][0]["type"], "http_status");
  EXPECT_EQ(curl_get(url + "/down", {"--cacert", local_ca}).status, 503) << "the HTTP toxic went over";
  const Curl fine = curl_get(url + "/fine", {"--cacert", local_ca});
  EXPECT_EQ(fine.status, 200) << fine.body;
  EXPECT_EQ(fine.body, "hello /fine");
}

// Plain and over TLS (a proxy with listen_tls; node trusts faultd's local CA,
// made first with faultctl ca init, through NODE_EXTRA_CA_CERTS).
TEST_F(ToxiproxyHttp, TheAnthropicSdkMeetsLlmToxics) {
  const std::string ca = dir() + "/ca";
  const CommandResult init = fltest::run_command({FAULTCTL_PATH, "ca", "init", "--dir", ca}, {}, 30s);
  ASSERT_TRUE(init.status.is(0)) << init.describe();
  ScopedCaDir ca_dir(ca);
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  const std::string sdk = LLM_SDK_DIR;
  ASSERT_TRUE(std::filesystem::exists(sdk + "/node_modules/@anthropic-ai/sdk"))
      << "the SDK is not installed: run scripts/install-deps.sh (npm ci in " << sdk << ")";
  const CommandResult r = fltest::run_command(
      {"node", sdk + "/toxiproxy_sdk_test.js", "http://127.0.0.1:" + std::to_string(toxiproxy_port()), "tls"},
      {.env = {"NODE_EXTRA_CA_CERTS=" + ca + "/ca.pem"}}, 120s);
  std::printf("%s", r.out.c_str());
  EXPECT_TRUE(r.status.is(0)) << r.describe() << "\nfaultd:\n" << faultd().err();
}

}  // namespace
}  // namespace fldaemon
