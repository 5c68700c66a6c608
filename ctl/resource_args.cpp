// `faultctl run process|cpu|memory|disk` flags: cxxopts tokenises, we validate and explain.
#include "ctl/resource_args.h"

#include <cxxopts.hpp>

#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "userspace/faults/resource/experiment.h"

namespace faultline {
namespace {

// The flags take their help and range from the resource experiment's table
// (userspace/faults/resource/experiment.cpp), each in the group of the kinds
// that take it.
cxxopts::Options resource_options() {
  cxxopts::Options o("faultctl run", "Apply a host resource fault for a fixed duration, guarded, with a deadman.");
  auto help = [](const char* flag) { return flag_help(resource_experiment_fields(), flag); };
  auto text = [] { return cxxopts::value<std::string>(); };
  // clang-format off
  o.add_options()
      ("kind", "process|cpu|memory|disk", text())
      ("duration", help("duration"), text())
      ("h,help", "this help");
  o.add_options("process")
      ("pid", help("pid"), text())
      ("name", help("name"), text())
      ("cgroup", help("cgroup"), text())
      ("action", help("action"), text())
      ("signal", help("signal"), text())
      ("force", help("force"));
  o.add_options("cpu")
      ("cores", help("cores"), text())
      ("load", help("load"), text());
  o.add_options("memory, disk")
      ("size", help("size"), text());
  o.add_options("disk")
      ("path", help("path"), text())
      ("fill", help("fill"), text())
      ("min-free", help("min-free"), text());
  // clang-format on
  add_run_options(o);
  o.parse_positional({"kind"});
  o.positional_help("process|cpu|memory|disk");
  return o;
}

Result<uint64_t> parse_count(const std::string& flag, const std::string& s, uint64_t max) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
    return bad("--" + flag + " '" + s + "': expected a whole number");
  uint64_t v = std::stoull(s);
  if (v > max) return bad("--" + flag + " " + s + ": at most " + std::to_string(max));
  return v;
}

// The unit parsers' messages begin with the value: "--size '1x' has an unknown unit".
constexpr std::string_view kBeforeValue = " ";

constexpr Example kResourceExamples[] = {
    {"burn 2 cores at 80% for a minute", "faultctl run cpu --cores 2 --load 80 --duration 1m"},
    {"hold 2 GiB of memory", "faultctl run memory --size 2GiB --duration 5m"},
    {"fill the file system of /var/lib/app to 95%, leaving at least 1 GiB free",
     "faultctl run disk --path /var/lib/app --fill 95% --min-free 1GiB --duration 2m"},
    {"freeze every process named nginx for 30 s, then resume them",
     "faultctl run process --name nginx --action freeze --duration 30s"},
    {"send SIGTERM to process 4242, and watch the health check for a minute",
     "faultctl run process --pid 4242 --action kill --signal TERM --duration 1m "
     "--health-url http://127.0.0.1:8080/healthz"},
    {"where a 10 GB balloon in /var/tmp would leave the disk; change nothing",
     "faultctl run disk --path /var/tmp --size 10GB --duration 1m --dry-run"},
};

}  // namespace

FlagTable resource_run_flags() { return flag_table(resource_options()); }

std::string resource_run_usage() {
  return with_examples(resource_options().help(
                           {"", "process", "cpu", "memory, disk", "disk", "guardrail", "experiment record", "output"}),
                       kResourceExamples);
}

Result<Parsed<ResourceRunArgs>> parse_resource_args(const std::vector<std::string>& args) {
  auto options = resource_options();
  auto parsed = parse_flag_words(options, args);
  if (!parsed) return parsed.error();
  const cxxopts::ParseResult& r = *parsed;
  if (r.count("help")) return Parsed<ResourceRunArgs>(HelpText{resource_run_usage()});
  if (!r.count("kind")) return bad("missing the fault kind: process, cpu, memory or disk");
  auto kind = resource_kind_from_name(r["kind"].as<std::string>());
  if (!kind)
    return bad("unknown resource fault kind '" + r["kind"].as<std::string>() + "' (process, cpu, memory, disk)");

  ResourceRunArgs o;
  ResourceSpec& s = o.spec;
  s.kind = *kind;
  for (const auto& flag : resource_specific_flags()) {
    if (r.count(flag) && !resource_kind_takes(s.kind, flag))
      return bad("--" + flag + " does not apply to a " + resource_kind_name(s.kind) + " fault");
  }
  auto str = [&](const char* f) { return r[f].as<std::string>(); };

  if (!r.count("duration")) return bad("--duration is required (1s-1h), e.g. --duration 30s");
  auto d = with_flag("duration", parse_duration_ns(str("duration")), kBeforeValue);
  if (!d) return d.error();
  s.duration_ns = *d;

  switch (s.kind) {
    case ResourceKind::Process: {
      if (r.count("pid")) {
        auto p = parse_count("pid", str("pid"), ResourceCaps::kMaxPid);
        if (!p) return p.error();
        s.pid = static_cast<int>(*p);
      }
      if (r.count("name")) {
        s.name = str("name");
        if (s.name.empty()) return bad("--name: empty pattern");
      }
      if (r.count("cgroup")) {
        s.cgroup = str("cgroup");
        if (s.cgroup.empty()) return bad("--cgroup: empty path");
      }
      if (!r.count("action")) return bad("--action is required for a process fault: freeze or kill");
      std::string a = str("action");
      if (a == "freeze")
        s.action = ProcessAction::Freeze;
      else if (a == "kill")
        s.action = ProcessAction::Kill;
      else
        return bad("--action '" + a + "': expected freeze or kill");
      if (r.count("signal")) {
        if (s.action != ProcessAction::Kill)
          return bad("--signal goes with --action kill; a freeze resumes with SIGCONT at the end");
        auto sig = with_flag("signal", parse_signal(str("signal")), kBeforeValue);
        if (!sig) return sig.error();
        s.signal = *sig;
      }
      s.force = r.count("force") > 0;
      break;
    }
    case ResourceKind::Cpu: {
      if (!r.count("cores")) return bad("--cores is required for a cpu fault");
      auto c = parse_count("cores", str("cores"), ResourceCaps::kMaxCores);
      if (!c) return c.error();
      s.cores = static_cast<unsigned>(*c);
      if (r.count("load")) {
        auto l = with_flag("load", parse_percent(str("load")), kBeforeValue);
        if (!l) return l.error();
        s.load = *l;
      }
      if (r.count("cgroup")) {
        s.cgroup = str("cgroup");
        if (s.cgroup.empty()) return bad("--cgroup: empty path");
      }
      break;
    }
    case ResourceKind::Memory: {
      if (!r.count("size")) return bad("--size is required for a memory fault, e.g. --size 512MB");
      auto b = with_flag("size", parse_size_bytes(str("size")), kBeforeValue);
      if (!b) return b.error();
      s.size_bytes = *b;
      break;
    }
    case ResourceKind::Disk: {
      if (!r.count("path")) return bad("--path is required for a disk fault: a directory on the file system to fill");
      s.path = str("path");
      if (r.count("fill")) {
        auto f = with_flag("fill", parse_percent(str("fill")), kBeforeValue);
        if (!f) return f.error();
        s.fill_percent = *f;
      }
      if (r.count("size")) {
        auto b = with_flag("size", parse_size_bytes(str("size")), kBeforeValue);
        if (!b) return b.error();
        s.size_bytes = *b;
      }
      if (r.count("min-free")) {
        auto b = with_flag("min-free", parse_size_bytes(str("min-free")), kBeforeValue);
        if (!b) return b.error();
        s.min_free_bytes = *b;
      }
      break;
    }
  }
  FL_TRY(validate(s));

  auto flags = parse_run_flags(r, "", s.duration_ns, args);
  if (!flags) return flags.error();
  o.flags = std::move(*flags);
  return Parsed<ResourceRunArgs>(std::move(o));
}

}  // namespace faultline
