// `faultctl run http` flags: cxxopts tokenises, the fault's own validation
// (validate_http_fault) judges the values, we name the flag.
#include "ctl/http_args.h"

#include <cctype>
#include <cxxopts.hpp>
#include <string_view>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "ctl/tls_flags.h"
#include "userspace/faults/packet/spec.h"

namespace faultline {
namespace {

constexpr Example kExamples[] = {
    {"30% of the POSTs to /payments on the payments service answer 503, for 5 minutes",
     "faultctl run http --target payments.internal:8080 --method POST --path /payments --status 503 --percent 30 "
     "--duration 5m"},
    {"only one tenant's requests answer 503 (the header's name without case, its value exactly)",
     "faultctl run http --target 10.0.0.9:8080 --header-equals X-Tenant=blue --status 503 --duration 5m"},
    {"every request of one command to its API waits 2 s before it is forwarded",
     "faultctl run http --target 127.0.0.1:8080 --delay 2s --duration 1m -- ./integration-tests"},
    {"responses of the cgroup myapp's /reports requests cut after 512 bytes",
     "faultctl run http --target 10.0.0.7:80 --path /reports --truncate 512 --cgroup myapp --duration 2m"},
    {"the model provider is overloaded for the first 2 attempts of each request (a plain-HTTP stand-in)",
     "faultctl run http --target 127.0.0.1:8089 --llm overloaded --llm-provider anthropic --attempts 2 --duration 1m "
     "-- node agent.js"},
    {"HTTPS without termination: connections whose SNI is api.example.com wait 2 s (port 443 is TLS)",
     "faultctl run http --target api.example.com:443 --host api.example.com --delay 2s --duration 1m -- ./client"},
    {"HTTPS terminated with the local CA (the command is told to trust it): 503 on /v1/charges",
     "faultctl run http --target api.example.com:443 --terminate-tls --path /v1/charges --status 503 --duration 1m "
     "-- python3 client.py"},
    {"an internal HTTPS service on another port, its private root trusted for the upstream side",
     "faultctl run http --target 10.0.0.9:8443 --terminate-tls --upstream-ca /etc/pki/internal-root.pem --reset "
     "--percent 10 --duration 5m"},
};

}  // namespace

Result<Parsed<TcpRunArgs>> parse_http_args(const std::vector<std::string>& args) {
  cxxopts::Options o("faultctl run http",
                     "HTTP/1.1 faults on the requests to a target (plain HTTP, or TLS: matched by SNI, or "
                     "terminated with the local CA), through a proxy the kernel redirects its connections to.");
  o.add_options()("target", "HOST:PORT of the HTTP service (HOST: address, CIDR or name)",
                  cxxopts::value<std::string>())("method", "match: only this method (GET, POST, ...)",
                                                 cxxopts::value<std::string>())(
      "path", "match: a path prefix (whole segments) or a glob (* ? [)", cxxopts::value<std::string>())(
      "host", "match: the Host header (default: any)", cxxopts::value<std::string>())(
      "header-equals", "match: a request header equal to a value, NAME=VALUE (repeatable)",
      cxxopts::value<std::vector<std::string>>())("header-contains",
                                                  "match: a request header containing a value, NAME=VALUE (repeatable)",
                                                  cxxopts::value<std::vector<std::string>>())(
      "status", "answer this status instead of forwarding (100-599)", cxxopts::value<std::string>())(
      "body", "--status: the body", cxxopts::value<std::string>())(
      "content-type", "--status: the body's type (default text/plain)", cxxopts::value<std::string>())(
      "delay", "hold each request this long (at most 60s)", cxxopts::value<std::string>())(
      "delay-at", "--delay: request (before it is forwarded, default) or response", cxxopts::value<std::string>())(
      "reset", "reset the connection (RST) mid-request")(
      "truncate", "forward, then cut the response body after N bytes and close", cxxopts::value<std::string>())(
      "abort-stream", "SSE: forward N events, then cut the stream", cxxopts::value<std::string>())(
      "llm", "a model provider's failure: overloaded, rate-limit, server-error, bad-gateway, timeout, stream-cut",
      cxxopts::value<std::string>())("llm-provider",
                                     "--llm: anthropic or openai (default: from the host, headers and path)",
                                     cxxopts::value<std::string>())(
      "retry-after", "--llm rate-limit: the retry-after seconds (default 1)", cxxopts::value<std::string>())(
      "percent", "share of matching requests faulted (default 100)", cxxopts::value<std::string>())(
      "attempts", "fault only the first N attempts of a request (the SDKs' x-stainless-retry-count)",
      cxxopts::value<std::string>())(
      "tls",
      "the target speaks TLS, not terminated (implied by port 443): faults match the SNI, --delay and --reset only")(
      "terminate-tls",
      "end the clients' TLS with a leaf of the local CA (faultctl ca) and re-encrypt to the "
      "verified upstream: every fault applies; a command is told to trust the CA")(
      "upstream-ca", "--terminate-tls: a PEM file of roots the upstream may also chain to",
      cxxopts::value<std::string>());
  add_stream_run_options(o);
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<TcpRunArgs>(
        HelpText{with_examples(o.help({"", "guardrail", "experiment record", "output"}) +
                                   "\n  -- COMMAND ARGS   scope: a command to run under the fault\n",
                               kExamples)});
  auto str = [&](const char* f) { return (*r)[f].as<std::string>(); };
  TcpRunArgs a;
  TcpFaultSpec& s = a.spec;
  s.command = cmd;
  if (!r->count("target")) return bad("--target is required (HOST:PORT of the HTTP service, e.g. 10.0.0.5:8080)");
  auto t = parse_tcp_target(str("target"));
  if (!t) return t.error();
  s.target = std::move(*t);

  HttpFault f;
  int kinds = 0;
  for (const char* k : {"status", "delay", "reset", "truncate", "abort-stream", "llm"}) kinds += r->count(k) ? 1 : 0;
  if (kinds != 1)
    return bad(
        "give exactly one fault: --status N, --delay D, --reset, --truncate N, --abort-stream N or --llm PRESET");
  auto count = [&](const char* flag, int64_t lo, int64_t hi) -> Result<int64_t> {
    const std::string v = str(flag);
    if (v.empty() || v.size() > 12 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < lo ||
        std::stoll(v) > hi)
      return bad(std::string("--") + flag + " " + v + ": a whole number from " + std::to_string(lo) + " to " +
                 std::to_string(hi));
    return std::stoll(v);
  };
  if (r->count("status")) {
    f.type = HttpFaultType::status;
    auto n = count("status", 100, 599);
    if (!n) return n.error();
    f.status = *n;
    if (r->count("body")) f.body = str("body");
    if (r->count("content-type")) f.content_type = str("content-type");
  } else if (r->count("delay")) {
    f.type = HttpFaultType::delay;
    auto d = with_flag("delay", parse_duration_ns(str("delay")));
    if (!d) return d.error();
    if (*d == 0 || *d > FaultCaps::kMaxDelayNs || *d % 1'000'000 != 0)
      return bad("--delay " + str("delay") + ": whole milliseconds, from 1ms to 60s");
    f.delay_ms = int64_t(*d / 1'000'000);
    if (r->count("delay-at")) {
      const std::string at = str("delay-at");
      if (at != "request" && at != "response") return bad("--delay-at " + at + ": request or response");
      f.where = at == "request" ? DelayPoint::request : DelayPoint::response;
    }
  } else if (r->count("reset")) {
    f.type = HttpFaultType::reset;
  } else if (r->count("truncate")) {
    f.type = HttpFaultType::truncate;
    auto n = count("truncate", 0, int64_t{1} << 40);
    if (!n) return n.error();
    f.bytes = *n;
  } else if (r->count("abort-stream")) {
    f.type = HttpFaultType::abort_stream;
    auto n = count("abort-stream", 0, 1'000'000);
    if (!n) return n.error();
    f.events = *n;
  } else {
    f.type = HttpFaultType::llm;
    auto j = nlohmann::json{{"type", "llm"}, {"attributes", {{"preset", str("llm")}}}};
    if (r->count("llm-provider")) j["attributes"]["provider"] = str("llm-provider");
    auto parsed = http_fault_from_json(j);
    if (!parsed)
      return bad("--llm " + str("llm") + (r->count("llm-provider") ? " --llm-provider " + str("llm-provider") : "") +
                 ": " + parsed.error().message);
    f.preset = parsed->preset;
    f.provider = parsed->provider;
    f.events = parsed->events;
    f.delay_ms = parsed->delay_ms;
    if (r->count("retry-after")) {
      auto n = count("retry-after", 0, 3600);
      if (!n) return n.error();
      f.retry_after_s = *n;
    }
  }
  for (const auto& [flag, applies] :
       std::vector<std::pair<const char*, bool>>{{"body", f.type == HttpFaultType::status},
                                                 {"content-type", f.type == HttpFaultType::status},
                                                 {"delay-at", f.type == HttpFaultType::delay},
                                                 {"llm-provider", f.type == HttpFaultType::llm},
                                                 {"retry-after", f.type == HttpFaultType::llm}}) {
    if (r->count(flag) && !applies)
      return bad(std::string("--") + flag + " does not apply to a " + std::string(http_fault_type_name(f.type)) +
                 " fault");
  }
  if (r->count("method")) f.match.method = str("method");
  if (r->count("path")) f.match.path = str("path");
  if (r->count("host")) f.match.host = str("host");
  for (const char* flag : {"header-equals", "header-contains"}) {
    if (!r->count(flag)) continue;
    for (const std::string& word : (*r)[flag].as<std::vector<std::string>>()) {
      const size_t eq = word.find('=');
      const std::string name = word.substr(0, eq);
      // A header name is an HTTP token (RFC 9110 5.1): letters, digits and !#$%&'*+-.^_`|~
      const bool token = !name.empty() && name.find_first_not_of(
                                              "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789!#$%&'*+-.^_`|~") == std::string::npos;
      if (eq == std::string::npos || !token)
        return bad(std::string("--") + flag + " " + word + ": expected NAME=VALUE, NAME a header name");
      HeaderMatch h;
      for (char c : name) h.name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      h.has_equals = std::string_view(flag) == "header-equals";
      (h.has_equals ? h.equals : h.contains) = word.substr(eq + 1);
      f.match.headers.push_back(std::move(h));
    }
  }
  if (r->count("percent")) {
    auto p = with_flag("percent", parse_percent(str("percent")));
    if (!p) return p.error();
    f.percent = *p;
  }
  if (r->count("attempts")) {
    auto n = count("attempts", 1, 100);
    if (!n) return n.error();
    f.attempts = *n;
  }
  f.name = f.type == HttpFaultType::llm ? "llm_" + std::string(llm_preset_name(f.preset))
                                        : std::string(http_fault_type_name(f.type));
  if (auto v = validate_http_fault(f); !v) return input_error(EINVAL, v.error().message);
  s.terminate_tls = r->count("terminate-tls") > 0;
  if (s.terminate_tls && r->count("tls"))
    return bad("--tls and --terminate-tls: pick one (--tls passes TLS through, --terminate-tls ends it)");
  FL_TRY(check_upstream_ca(s.terminate_tls, r->count("upstream-ca") > 0,
                           r->count("upstream-ca") ? str("upstream-ca") : std::string()));
  if (r->count("upstream-ca")) s.upstream_ca = str("upstream-ca");
  if (!s.terminate_tls && target_is_tls(s.target, r->count("tls") > 0)) {
    // The flag that asks for the plaintext, in the order needs_plaintext() judges.
    std::string flag;
    if (f.type == HttpFaultType::abort_stream)
      flag = "--abort-stream";
    else if (f.type != HttpFaultType::delay && f.type != HttpFaultType::reset)
      flag = "--" + std::string(http_fault_type_name(f.type));
    else if (f.where == DelayPoint::response)
      flag = "--delay-at response";
    else
      for (const char* k : {"method", "path", "header-equals", "header-contains", "attempts"})
        if (flag.empty() && r->count(k)) flag = std::string("--") + k;
    FL_TRY(check_fault_on_tls(f, flag, s.target.text));
  }
  s.http_faults.push_back(std::move(f));

  FL_TRY(parse_stream_run_flags(*r, args, a));
  return Parsed<TcpRunArgs>(std::move(a));
}

}  // namespace faultline
