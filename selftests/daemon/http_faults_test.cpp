// faultd's HTTP faults (the Toxiproxy API's Faultline extension): the official
// Anthropic and OpenAI SDKs against every LLM preset through a real faultd
// proxy (selftests/llm/sdk_test.js), and every bad request refused by name
// with nothing changed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "faultd_env.h"

namespace fldaemon {
namespace {

class HttpFaultsApi : public FaultdTest {};

TEST_F(HttpFaultsApi, TheOfficialSdksMeetEveryLlmPreset) {
  start_faultd();
  ASSERT_NE(toxiproxy_port(), 0) << faultd().err();
  const std::string dir = LLM_SDK_DIR;
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/@anthropic-ai/sdk") &&
              std::filesystem::exists(dir + "/node_modules/openai"))
      << "the SDKs are not installed: run scripts/install-deps.sh (npm ci in " << dir << ")";
  const CommandResult r = fltest::run_command(
      {"node", dir + "/sdk_test.js", "http://127.0.0.1:" + std::to_string(toxiproxy_port())}, {}, 180s);
  std::printf("%s", r.out.c_str());
  EXPECT_TRUE(r.status.is(0)) << r.describe() << "\nfaultd:\n" << faultd().err();
}

TEST_F(HttpFaultsApi, BadRequestsAreRefusedByNameAndChangeNothing) {
  start_faultd();
  const uint16_t port = toxiproxy_port();
  ASSERT_NE(port, 0) << faultd().err();
  ASSERT_EQ(http(port, "POST", "/proxies", R"({"name":"web","upstream":"127.0.0.1:9"})").status, 201);
  ASSERT_EQ(
      http(port, "POST", "/proxies/web/http_faults", R"({"name":"s","type":"status","attributes":{"status":503}})")
          .status,
      200);
  const std::string before = http(port, "GET", "/proxies/web/http_faults").body;
  struct Case {
    std::string method, path, body;
    int status;
    std::string error;
  };
  const Case cases[] = {
      {"POST", "/proxies/nope/http_faults", R"({"type":"reset"})", 404, "proxy not found"},
      {"POST", "/proxies/web/http_faults", "not json", 400, "bad request body: expected a JSON object"},
      {"POST", "/proxies/web/http_faults", R"({"name":"s","type":"reset"})", 409, "http fault already exists"},
      {"POST", "/proxies/web/http_faults", R"({"type":"teapot"})", 400,
       "http fault: \"type\": unknown type \"teapot\" (status, delay, reset, truncate, abort_stream, llm)"},
      {"POST", "/proxies/web/http_faults", R"({"attributes":{}})", 400,
       "http fault: \"type\": missing (status, delay, reset, truncate, abort_stream, llm)"},
      {"POST", "/proxies/web/http_faults", R"({"type":"status"})", 400,
       "http fault: \"attributes.status\": missing (100..599)"},
      {"POST", "/proxies/web/http_faults", R"({"type":"status","attributes":{"status":42}})", 400,
       "http fault: \"attributes.status\": must be 100..599, got 42"},
      {"POST", "/proxies/web/http_faults", R"({"type":"status","attributes":{"status":503,"latency":1}})", 400,
       "http fault: \"attributes.latency\": not an attribute of status (status, body, content_type, headers, delay)"},
      {"POST", "/proxies/web/http_faults", R"({"type":"reset","percent":150})", 400,
       "http fault: \"percent\": must be 0..100, got 150"},
      {"POST", "/proxies/web/http_faults", R"({"type":"reset","colour":"red"})", 400,
       "http fault: \"colour\": unknown field (name, type, match, percent, attempts, first_n, attributes)"},
      {"POST", "/proxies/web/http_faults", R"({"type":"reset","match":{"path":"payments"}})", 400,
       "http fault: \"match.path\": must start with / (a prefix or a glob), got \"payments\""},
      {"POST", "/proxies/web/http_faults", R"({"type":"reset","match":{"headers":[{"name":"x"}]}})", 400,
       "http fault: \"match.headers[0]\": needs exactly one of \"equals\" and \"contains\""},
      {"POST", "/proxies/web/http_faults", R"({"type":"delay","attributes":{"delay":10,"where":"later"}})", 400,
       "http fault: \"attributes.where\": must be \"request\" or \"response\", got \"later\""},
      {"POST", "/proxies/web/http_faults", R"({"type":"llm","attributes":{"preset":"melted"}})", 400,
       "http fault: \"attributes.preset\": unknown preset \"melted\" (overloaded, rate-limit, server-error, "
       "bad-gateway, timeout, stream-cut)"},
      {"POST", "/proxies/web/http_faults", R"({"type":"llm","attributes":{"preset":"overloaded","provider":"x"}})", 400,
       "http fault: \"attributes.provider\": unknown provider \"x\" (anthropic, openai; omitted: from the host)"},
      {"POST", "/proxies/web/http_faults", R"({"type":"llm","attempts":-1,"attributes":{"preset":"timeout"}})", 400,
       "http fault: \"attempts\": must be 0..1000, got -1"},
      {"POST", "/proxies/web/http_faults",
       R"({"type":"status","attributes":{"status":503,"headers":{"Content-Length":"3"}}})", 400,
       "http fault: \"attributes.headers.Content-Length\": is set by the proxy"},
      {"GET", "/proxies/web/http_faults/nope", "", 404, "http fault not found"},
      {"DELETE", "/proxies/web/http_faults/nope", "", 404, "http fault not found"},
      {"POST", "/proxies/web/http_limits", R"({"max_headers":"many"})", 400,
       "http limits: \"max_headers\": must be a whole number 0..1000000000, got \"many\""},
      {"POST", "/proxies/web/http_limits", R"({"max_header_bytes":10})", 400,
       "http limits: max_header_bytes must be at least 1024 and max_headers at least 1"},
      {"POST", "/proxies/web/http_limits", R"({"header_timeout":10})", 400,
       "http limits: \"header_timeout\": unknown field (max_header_bytes, max_headers, head_timeout)"},
  };
  for (const Case& c : cases) {
    const TcpReply r = http(port, c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.path << " " << c.body << ": " << r.body;
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_EQ(j.is_object() ? j.value("error", "") : r.body, c.error) << c.method << " " << c.path << " " << c.body;
  }
  EXPECT_EQ(http(port, "GET", "/proxies/web/http_faults").body, before) << "a refused request changed the faults";
  const TcpReply limits = http(port, "POST", "/proxies/web/http_limits", R"({"head_timeout":500})");
  EXPECT_EQ(limits.status, 200) << limits.body;
  EXPECT_EQ(nlohmann::json::parse(http(port, "GET", "/proxies/web/http_limits").body),
            (nlohmann::json{{"max_header_bytes", 32768}, {"max_headers", 100}, {"head_timeout", 500}}));
  // Counted in /metrics, listed in faultd's status with its bound, ended by abort --all.
  const TcpReply metrics = http(metrics_port(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("faultline_proxy_http_fault_requests_total{proxy=\"web\",fault=\"s\"} 0"),
            std::string::npos)
      << metrics.body;
  const CommandResult st = faultctl({"status"}, true);
  EXPECT_NE(st.out.find("http s: status"), std::string::npos) << st.out;
  const CommandResult ab = faultctl({"abort", "--all"}, true);
  EXPECT_TRUE(ab.status.is(0)) << ab.describe();
  EXPECT_EQ(http(port, "GET", "/proxies/web/http_faults").body, "[]\n");
}

}  // namespace
}  // namespace fldaemon
