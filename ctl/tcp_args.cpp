// `faultctl run tcp` flags: cxxopts tokenises, we explain.
#include "ctl/tcp_args.h"

#include <cmath>
#include <cxxopts.hpp>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "userspace/faults/stream/experiment.h"
#include "userspace/faults/stream/spec_check.h"

namespace faultline {
namespace {

constexpr Example kTcpExamples[] = {
    {"the replies of every TCP connection of the host to the database come 200 ms (±20 ms) late",
     "faultctl run tcp --target 10.0.0.5:5432 --toxic latency=200ms,jitter=20ms --duration 1m"},
    {"30% of the connections of the cgroup myapp to api.internal:443 are reset after 500 ms",
     "faultctl run tcp --target api.internal:443 --toxic reset_peer=500ms --toxicity 0.3 --cgroup myapp --duration 5m"},
    {"uploads of one command crawl at 50 KB/s",
     "faultctl run tcp --target 127.0.0.1:9000 --toxic bandwidth=50KB/s --direction upstream --duration 2m -- "
     "./upload.sh"},
    {"replies cut into 16-byte slices 1 ms apart, and closed after 1 MB",
     "faultctl run tcp --target [::1]:8080 --toxic slicer=16B,delay=1ms --toxic limit_data=1MB --duration 30s"},
    {"what would be intercepted, and nothing changed",
     "faultctl run tcp --target db.internal:5432 --toxic timeout=0 --duration 10s --dry-run"},
};

}  // namespace

Result<Parsed<TcpRunArgs>> parse_tcp_args(const std::vector<std::string>& args) {
  cxxopts::Options o("faultctl run tcp", "TCP stream faults (toxics) on the connections to a target, through a proxy.");
  auto help = [](const char* flag) { return flag_help(tcp_experiment_fields(), flag); };
  // clang-format off
  o.add_options()
      ("target", help("target"), cxxopts::value<std::string>())
      ("toxic", help("toxic"), cxxopts::value<std::vector<std::string>>())
      ("direction", help("direction"), cxxopts::value<std::string>())
      ("toxicity", help("toxicity"), cxxopts::value<std::string>());
  // clang-format on
  add_stream_run_options(o);
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<TcpRunArgs>(
        HelpText{with_examples(o.help({"", "guardrail", "experiment record", "output"}) +
                                   "\n  -- COMMAND ARGS   scope: a command to run under the fault\n",
                               kTcpExamples)});
  TcpRunArgs a;
  TcpFaultSpec& s = a.spec;
  s.command = cmd;
  if (!r->count("target")) return bad("--target is required (HOST:PORT, e.g. --target 10.0.0.5:5432)");
  auto t = parse_tcp_target((*r)["target"].as<std::string>());
  if (!t) return t.error();
  s.target = std::move(*t);
  Stream stream = Stream::downstream;
  if (r->count("direction")) {
    std::string d = (*r)["direction"].as<std::string>();
    if (d != "upstream" && d != "downstream")
      return bad("--direction " + d + ": upstream (client to server) or downstream (server to client)");
    stream = d == "upstream" ? Stream::upstream : Stream::downstream;
  }
  double toxicity = 1.0;
  if (r->count("toxicity")) {
    std::string v = (*r)["toxicity"].as<std::string>();
    char* end = nullptr;
    toxicity = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(toxicity)) toxicity = -1;  // refused below, as written
    FL_TRY(check_toxicity(toxicity, v));
  }
  if (!r->count("toxic")) return bad("--toxic is required (e.g. --toxic latency=200ms or --toxic reset_peer=0)");
  // cxxopts splits a vector flag's values at commas: put each toxic together again.
  std::vector<std::string> toxic_texts;
  for (const auto& w : (*r)["toxic"].as<std::vector<std::string>>()) {
    if (toxic_texts.empty() || starts_toxic(w))
      toxic_texts.push_back(w);
    else
      toxic_texts.back() += "," + w;
  }
  auto toxics = parse_toxics(toxic_texts, stream, toxicity);
  if (!toxics) return toxics.error();
  s.toxics = std::move(*toxics);
  FL_TRY(parse_stream_run_flags(*r, args, a));
  return Parsed<TcpRunArgs>(std::move(a));
}

// --duration, --cgroup and --drain: the same rows in the tcp and http tables.
void add_stream_run_options(cxxopts::Options& o) {
  auto help = [](const char* flag) { return flag_help(tcp_experiment_fields(), flag); };
  // clang-format off
  o.add_options()
      ("duration", help("duration"), cxxopts::value<std::string>())
      ("cgroup", help("cgroup"), cxxopts::value<std::string>())
      ("drain", help("drain"), cxxopts::value<std::string>())
      ("h,help", "help");
  // clang-format on
  add_run_options(o);
}

Status parse_stream_run_flags(const cxxopts::ParseResult& r, const std::vector<std::string>& args, TcpRunArgs& a) {
  TcpFaultSpec& s = a.spec;
  if (!r.count("duration")) return bad("--duration is required (at most 1h), e.g. --duration 1m");
  auto d = with_flag("duration", parse_duration_ns(r["duration"].as<std::string>()));
  if (!d) return d.error();
  s.duration_ns = *d;
  if (r.count("cgroup")) {
    s.cgroup = r["cgroup"].as<std::string>();
    if (s.cgroup.empty()) return bad("--cgroup: empty path");
  }
  if (r.count("drain")) {
    auto dr = with_flag("drain", parse_duration_ns(r["drain"].as<std::string>()));
    if (!dr) return dr.error();
    s.drain_ns = *dr;
  }
  // The caps faultcp and faultd check too (userspace/faults/stream/spec_check.h).
  if (auto v = validate(s); !v) return input_error(EINVAL, v.error().message);
  auto run = parse_run_flags(r, "", s.duration_ns, args);
  if (!run) return run.error();
  a.flags = std::move(*run);
  return {};
}

}  // namespace faultline
