// `faultctl run http` flags: cxxopts tokenises, http_fault_from_flags() (the
// checks faultcp and faultd make too) and the fault's own validation
// (validate_http_fault) judge the values, naming the flag.
#include "ctl/http_args.h"

#include <cxxopts.hpp>

#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "ctl/tls_flags.h"
#include "userspace/faults/packet/spec.h"
#include "userspace/faults/stream/experiment.h"
#include "userspace/faults/stream/spec_check.h"

namespace faultline {
namespace {

// run http --delay and run/guard latency share one cap.
static_assert(StreamCaps::kMaxHttpDelayNs == FaultCaps::kMaxDelayNs);

constexpr Example kHttpExamples[] = {
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
  // The flags take their help and range from the http experiment's table
  // (userspace/faults/stream/experiment.cpp).
  auto help = [](const char* flag) { return flag_help(http_experiment_fields(), flag); };
  // clang-format off
  o.add_options()
      ("target", help("target"), cxxopts::value<std::string>())
      ("method", help("method"), cxxopts::value<std::string>())
      ("path", help("path"), cxxopts::value<std::string>())
      ("host", help("host"), cxxopts::value<std::string>())
      ("header-equals", help("header-equals"), cxxopts::value<std::vector<std::string>>())
      ("header-contains", help("header-contains"), cxxopts::value<std::vector<std::string>>())
      ("status", help("status"), cxxopts::value<std::string>())
      ("body", help("body"), cxxopts::value<std::string>())
      ("content-type", help("content-type"), cxxopts::value<std::string>())
      ("delay", help("delay"), cxxopts::value<std::string>())
      ("delay-at", help("delay-at"), cxxopts::value<std::string>())
      ("reset", help("reset"))
      ("truncate", help("truncate"), cxxopts::value<std::string>())
      ("abort-stream", help("abort-stream"), cxxopts::value<std::string>())
      ("llm", help("llm"), cxxopts::value<std::string>())
      ("llm-provider", help("llm-provider"), cxxopts::value<std::string>())
      ("retry-after", help("retry-after"), cxxopts::value<std::string>())
      ("percent", help("percent"), cxxopts::value<std::string>())
      ("attempts", help("attempts"), cxxopts::value<std::string>())
      ("tls", help("tls"))
      ("terminate-tls", help("terminate-tls"))
      ("upstream-ca", help("upstream-ca"), cxxopts::value<std::string>());
  // clang-format on
  add_stream_run_options(o);
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<TcpRunArgs>(
        HelpText{with_examples(o.help({"", "guardrail", "experiment record", "output"}) +
                                   "\n  -- COMMAND ARGS   scope: a command to run under the fault\n",
                               kHttpExamples)});
  auto str = [&](const char* f) { return (*r)[f].as<std::string>(); };
  TcpRunArgs a;
  TcpFaultSpec& s = a.spec;
  s.command = cmd;
  if (!r->count("target")) return bad("--target is required (HOST:PORT of the HTTP service, e.g. 10.0.0.5:8080)");
  auto t = parse_tcp_target(str("target"));
  if (!t) return t.error();
  s.target = std::move(*t);

  // The fault, match and TLS flags as written, judged by the checks faultcp and
  // faultd make too (userspace/faults/stream/spec_check.h); then the
  // --upstream-ca file is loaded here, as termination will load it.
  HttpFlagValues v;
  for (const char* k : {"method", "path", "host", "status", "body", "content-type", "delay", "delay-at", "truncate",
                        "abort-stream", "llm", "llm-provider", "retry-after", "percent", "attempts", "upstream-ca"})
    if (r->count(k)) v.given[k] = {str(k)};
  for (const char* k : {"reset", "tls", "terminate-tls"})
    if (r->count(k)) v.given[k] = {""};
  for (const char* k : {"header-equals", "header-contains"})
    if (r->count(k)) v.given[k] = (*r)[k].as<std::vector<std::string>>();
  FL_TRY(http_fault_from_flags(v, s));
  FL_TRY(check_upstream_ca(s.terminate_tls, r->count("upstream-ca") > 0, s.upstream_ca));

  FL_TRY(parse_stream_run_flags(*r, args, a));
  return Parsed<TcpRunArgs>(std::move(a));
}

}  // namespace faultline
