// `faultctl run syscall` flags: cxxopts tokenises, we explain.
#include "ctl/syscall_args.h"

#include <cxxopts.hpp>

#include "base/errno_names.h"
#include "base/seeded_random.h"
#include "base/units.h"
#include "ctl/flag_error.h"
#include "ctl/flag_words.h"
#include "userspace/faults/syscall/experiment.h"
#include "userspace/faults/syscall/path_args.h"
#include "userspace/faults/syscall/spec_check.h"

namespace faultline {
namespace {

constexpr Example kSyscallExamples[] = {
    {"every connect() of one command fails with ECONNREFUSED",
     "faultctl run syscall --syscall connect --errno ECONNREFUSED --duration 30s -- curl http://10.0.0.2/"},
    {"30% of the connects in the cgroup myapp fail, for a minute",
     "faultctl run syscall --syscall connect --errno ECONNREFUSED --percent 30 --duration 1m --cgroup myapp"},
    {"10% of the reads and writes of a running process fail with EIO",
     "faultctl run syscall --syscall read,write --errno EIO --percent 10 --duration 1m --pid 4242"},
    {"a service starts up: 50 opens pass, then 3 fail with EIO, no more",
     "faultctl run syscall --syscall openat --errno EIO --after 50 --max-injections 3 --duration 2m -- ./server"},
    {"the connects of the cgroup myapp start failing 20 s from now",
     "faultctl run syscall --syscall connect --errno ECONNREFUSED --start-after 20s --duration 1m --cgroup myapp"},
    {"python3 starts; then 40% of its opens under /srv/data/ fail with EIO",
     "faultctl run syscall --syscall openat --errno EIO --percent 40 --path /srv/data/ --duration 1m -- python3 "
     "app.py"},
    {"replay which of a command's opens failed: same seed, same answers",
     "faultctl run syscall --syscall openat --errno EIO --percent 20 --seed 42 --duration 1m -- ./server"},
    {"which mechanism would be used, and nothing changed",
     "faultctl run syscall --syscall openat --errno EACCES --duration 10s --dry-run -- cat /etc/hostname"},
};

// The flags of the syscall experiment's fields take their help and range from
// its table (userspace/faults/syscall/experiment.cpp); --path and --seed serve
// a command faultctl starts, and are this host's.
cxxopts::Options syscall_options() {
  cxxopts::Options o("faultctl run syscall", "Make syscalls fail with an errno.");
  auto help = [](const char* flag) { return flag_help(syscall_experiment_fields(), flag); };
  auto text = [] { return cxxopts::value<std::string>(); };
  // clang-format off
  o.add_options()
      ("syscall", help("syscall"), cxxopts::value<std::vector<std::string>>())
      ("errno", help("errno"), text())
      ("percent", help("percent"), text())
      ("duration", help("duration"), text())
      ("cgroup", help("cgroup"), text())
      ("pid", help("pid"), text())
      ("include-loader", help("include-loader"))
      ("via", help("via"), text())
      ("after", help("after"), text())
      ("max-injections", help("max-injections"), text())
      ("start-after", help("start-after"), text())
      ("path", "file syscalls only: fail only calls naming a path under this absolute prefix (repeatable; "
               "matched on whole components, relative paths resolved against the caller's cwd or dirfd; seccomp)",
               cxxopts::value<std::vector<std::string>>())
      ("seed", "seed of the --percent draw, 0 to 2^64-1, to replay a run (seccomp and cgroup rungs, not lsm; "
               "default: drawn and recorded where the rung can follow it)", text())
      ("h,help", "help");
  // clang-format on
  add_run_options(o);
  return o;
}

}  // namespace

FlagTable syscall_run_flags() { return flag_table(syscall_options()); }

Result<Parsed<SyscallRunArgs>> parse_syscall_args(const std::vector<std::string>& args) {
  cxxopts::Options o = syscall_options();
  auto [flags, cmd] = split_command(args);
  auto r = parse_flag_words(o, flags, kCommandAfterDashesHint);
  if (!r) return r.error();
  if (r->count("help"))
    return Parsed<SyscallRunArgs>(
        HelpText{with_examples(o.help({"", "guardrail", "experiment record", "output"}) +
                                   "\n  -- COMMAND ARGS   scope: a command to run under the fault\n",
                               kSyscallExamples)});
  SyscallRunArgs a;
  SyscallFaultSpec& s = a.spec;
  s.command = cmd;
  if (!r->count("syscall")) return bad("--syscall is required (e.g. --syscall connect or --syscall openat,read)");
  for (const auto& n : (*r)["syscall"].as<std::vector<std::string>>()) {
    if (const std::string why = syscall_name_problem(n); !why.empty())
      return bad(n.empty() ? "--syscall: " + why : "--syscall " + n + ": " + why);
    s.syscalls.push_back(n);
  }
  if (!r->count("errno")) return bad("--errno is required (e.g. --errno EIO)");
  auto e = errno_from_name((*r)["errno"].as<std::string>());
  if (!e)
    return bad("--errno " + (*r)["errno"].as<std::string>() +
               ": not a known errno name (EIO, EACCES, ECONNREFUSED, ...)");
  s.err = *e;
  if (r->count("percent")) {
    auto p = with_flag("percent", parse_percent((*r)["percent"].as<std::string>()));
    if (!p) return p.error();
    s.percent = *p;
  }
  if (!r->count("duration")) return bad("--duration is required (at most 1h), e.g. --duration 30s");
  auto d = with_flag("duration", parse_duration_ns((*r)["duration"].as<std::string>()));
  if (!d) return d.error();
  s.duration_ns = *d;
  int scopes = (r->count("cgroup") ? 1 : 0) + (r->count("pid") ? 1 : 0) + (cmd.empty() ? 0 : 1);
  if (scopes != 1) return bad("give exactly one scope: --cgroup PATH, --pid PID, or -- COMMAND ARGS");
  if (r->count("cgroup")) {
    s.cgroup = (*r)["cgroup"].as<std::string>();
    if (s.cgroup.empty()) return bad("--cgroup: empty path");
  }
  if (r->count("pid")) {
    std::string p = (*r)["pid"].as<std::string>();
    if (p.empty() || p.size() > 9 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) <= 1)
      return bad("--pid " + p + ": not a process id above 1");
    s.pid = std::stoi(p);
  }
  if (r->count("after")) {
    auto n = parse_count_flag("after", (*r)["after"].as<std::string>(), 1, SyscallCaps::kMaxInjections);
    if (!n) return n.error();
    s.after = *n;
  }
  if (r->count("max-injections")) {
    auto n =
        parse_count_flag("max-injections", (*r)["max-injections"].as<std::string>(), 1, SyscallCaps::kMaxInjections);
    if (!n) return n.error();
    s.max_injections = *n;
  }
  if (r->count("start-after")) {
    auto sa = with_flag("start-after", parse_duration_ns((*r)["start-after"].as<std::string>()));
    if (!sa) return sa.error();
    if (*sa == 0) return bad("--start-after must be above 0 (leave it out to start at once)");
    s.start_after_ns = *sa;
  }
  if (r->count("path")) {
    // Checked as given (validate() below: empty, absolute, length, count, syscalls), kept normalized.
    for (const auto& p : (*r)["path"].as<std::vector<std::string>>()) {
      SyscallFaultSpec given = s;
      given.paths = {p};
      if (auto v = validate(given); !v) return input_error(EINVAL, v.error().message);
      s.paths.push_back(normalize_path(p));
    }
  }
  if (r->count("seed")) {
    auto seed = parse_seed_flag((*r)["seed"].as<std::string>());
    if (!seed) return seed.error();
    s.seed = *seed;
  } else {
    s.seed = draw_seed();
    s.seed_drawn = true;
  }
  s.include_loader = r->count("include-loader") > 0;
  if (r->count("via")) {
    s.via = (*r)["via"].as<std::string>();
  }
  // The caps and combinations faultcp and faultd check too (spec_check.h).
  if (auto v = validate(s); !v) return input_error(EINVAL, v.error().message);
  auto run = parse_run_flags(*r, "", s.duration_ns, args);
  if (!run) return run.error();
  a.flags = std::move(*run);
  return Parsed<SyscallRunArgs>(std::move(a));
}

}  // namespace faultline
