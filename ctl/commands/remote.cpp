// faultctl --control-plane URL: run (submit and follow), list, watch and abort
// experiments on faultcp's agents; put, get, export and apply the workspace's
// policy bundle. A remote run takes the `faultctl run KIND`
// flags (the same parser), turned into the experiment spec; its end maps to
// the exit codes of a local run.
#include <unistd.h>

#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/errno_names.h"
#include "base/exit_code.h"
#include "base/units.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/http_args.h"
#include "ctl/packet_args.h"
#include "ctl/resource_args.h"
#include "ctl/syscall_args.h"
#include "ctl/tcp_args.h"
#include "userspace/faults/packet/experiment.h"
#include "userspace/guard_runtime/cp_link.h"
#include "userspace/guardrails/http_client.h"
#include "userspace/ops/experiment.h"
#include "userspace/policy/policy.h"

namespace faultline {
namespace {

constexpr uint64_t kCallTimeoutMs = 15'000;
constexpr auto kWatchEvery = std::chrono::milliseconds(250);

// The flags of a family's table (experiment.h) and of every kind's
// guardrails and record, which an experiment carries, and --json; any other
// flag is refused by name.
std::vector<std::string> carried_flags(std::span<const ExperimentField> family) {
  std::vector<std::string> out;
  for (const auto& f : family) out.emplace_back(f.flag);
  return out;
}
const std::vector<std::string> kCarriedRun = [] {
  std::vector<std::string> out = carried_flags(guardrail_fields());
  out.emplace_back("json");
  return out;
}();

Status add_run_flags(nlohmann::json& spec, const RunFlags& flags);

// faultcp, from --control-plane and --token.
using Remote = CpLink;

// faultcp's error envelope as one line, and the exit code it means: 2 for
// what the request got wrong (400, 404, 413), 1 otherwise.
int refused(const std::string& who, const HttpAnswer& a) {
  auto j = nlohmann::json::parse(a.response.body, nullptr, false);
  std::string msg = !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()
                        ? j["error"].get<std::string>()
                        : a.response.body.substr(0, 300);
  const int code = a.response.status.code;
  std::cerr << who << ": the control plane answered " << code << ": " << msg << "\n";
  return code == 400 || code == 404 || code == 413 ? kExitBadInput : kExitFailure;
}

bool is_final(const std::string& s) {
  return s == "completed" || s == "aborted-by-slo" || s == "failed" || s == "cancelled";
}

// The exit code a local run would have given: the agent's own (its record
// carries what guarded_run() returned) when it reported one, else by state.
int exit_code_of(const nlohmann::json& e) {
  const std::string state = e.value("status", "");
  const auto& rec = e.contains("record") ? e["record"] : nlohmann::json();
  if (state != "cancelled" && rec.is_object() && rec.contains("exit_code") && rec["exit_code"].is_number_integer())
    return rec["exit_code"].get<int>();
  if (state == "completed") return kExitCompleted;
  if (state == "aborted-by-slo") return kExitGuardrail;
  return kExitFailure;  // failed, cancelled (an abort, as a local run aborted from outside)
}

// Follows experiment id to its end: a line per state (JSON lines with json),
// the agent's progress, the end; returns the exit code.
int follow(const Remote& r, int64_t id, bool json) {
  const std::string who = "faultctl watch";
  std::string last_state;
  nlohmann::json last_progress;
  int failures = 0;
  for (;;) {
    auto a = r.call("GET", "/v1/experiments/" + std::to_string(id));
    if (!a) {
      if (++failures >= 40) {  // 10 s without faultcp
        std::cerr << who << ": " << a.error().describe() << "\n";
        return kExitFailure;
      }
      std::this_thread::sleep_for(kWatchEvery);
      continue;
    }
    failures = 0;
    if (a->response.status.code != 200) return refused(who, *a);
    auto e = nlohmann::json::parse(a->response.body, nullptr, false);
    if (e.is_discarded() || !e.is_object()) {
      std::cerr << who << ": the control plane's answer is not JSON\n";
      return kExitFailure;
    }
    const std::string state = e.value("status", "");
    if (state != last_state) {
      last_state = state;
      if (json) {
        std::cout
            << nlohmann::json{{"event", "state"}, {"id", id}, {"state", state}, {"agent_id", e["agent_id"]}}.dump()
            << std::endl;
      } else if (!is_final(state)) {
        std::cout << "experiment " << id << ": " << state << std::endl;
      }
    }
    const auto& rec = e.contains("record") ? e["record"] : nlohmann::json();
    if (!is_final(state) && rec.is_object() && rec.contains("progress") && rec["progress"] != last_progress) {
      last_progress = rec["progress"];
      if (json) {
        nlohmann::json p = last_progress;
        p["experiment"] = id;
        std::cout << p.dump() << std::endl;
      } else {
        std::cerr << "experiment " << id << ": " << last_progress.value("left_s", 0) << "s left"
                  << (last_progress.contains("counters") ? " | " + last_progress["counters"].dump() : "") << std::endl;
      }
    }
    if (is_final(state)) {
      const int code = exit_code_of(e);
      if (json) {
        nlohmann::json end{{"event", "ended"}, {"id", id}, {"state", state}, {"exit_code", code}};
        if (!e.value("detail", "").empty()) end["detail"] = e["detail"];
        if (rec.is_object()) end["record"] = rec;
        std::cout << end.dump() << std::endl;
      } else {
        std::string counters;
        if (rec.is_object() && rec.contains("ended") && rec["ended"].contains("counters"))
          counters = ": " + rec["ended"]["counters"].dump();
        std::cout << "experiment " << id << " ended (" << state
                  << (e.value("detail", "").empty() ? "" : ": " + e.value("detail", "")) << ")" << counters << "\n";
        if (rec.is_object() && rec.contains("verdict"))
          std::cout << "verdict: " << rec["verdict"].get<std::string>() << "\n";
      }
      return code;
    }
    std::this_thread::sleep_for(kWatchEvery);
  }
}

Result<nlohmann::json> spec_of(const PacketRunArgs& a) {
  static const std::vector<std::string> carried = carried_flags(packet_experiment_fields());
  for (const auto& g : a.given)
    if (std::find(carried.begin(), carried.end(), g) == carried.end() &&
        std::find(kCarriedRun.begin(), kCarriedRun.end(), g) == kCarriedRun.end())
      return input_error(0, "--" + g +
                                " cannot be sent to the control plane: an experiment spec carries every packet "
                                "flag but --attach and --via, the guardrails (--health-url, --health-ca, "
                                "--health-max-latency, --interval, --prometheus-url, --prometheus-ca, --query, "
                                "--kernel-signal, --abort-above/--abort-below) and --hypothesis, --steady-state");
  auto spec = packet_spec_to_json(a.spec);
  if (!spec) return spec.error();
  FL_TRY(add_run_flags(*spec, a.flags));
  return spec;
}

// The guardrails and the record of every kind's spec: the typed experiment's writer.
Status add_run_flags(nlohmann::json& spec, const RunFlags& flags) {
  return add_experiment_guardrails(flags.guardrails, flags.record, spec);
}

// The flags given on a command line ("--cores 2", "--cores=2"), without "--";
// "--" itself when a command follows.
std::vector<std::string> given_flags(const std::vector<std::string>& args) {
  std::vector<std::string> g;
  for (const auto& w : args) {
    if (w == "--") {
      g.push_back("--");
      break;
    }
    if (w.rfind("--", 0) == 0)
      g.push_back(w.substr(2, w.find('=') == std::string::npos ? std::string::npos : w.find('=') - 2));
  }
  return g;
}

// Whether a flag (without its dashes) is among those given_flags() found.
std::function<bool(const char*)> given_test(const std::vector<std::string>& given) {
  return [&given](const char* f) { return std::find(given.begin(), given.end(), f) != given.end(); };
}

// A flag of `given` that a spec of this kind cannot carry, named.
Status refuse_uncarried(const std::vector<std::string>& given, const std::vector<std::string>& carried,
                        const std::string& kind_flags) {
  for (const auto& g : given) {
    if (g == "--")
      return input_error(0,
                         "-- COMMAND cannot be sent to the control plane: an experiment names a cgroup or pid, "
                         "faultd starts no command");
    if (std::find(carried.begin(), carried.end(), g) == carried.end() &&
        std::find(kCarriedRun.begin(), kCarriedRun.end(), g) == kCarriedRun.end())
      return input_error(0, "--" + g + " cannot be sent to the control plane: an experiment spec carries " +
                                kind_flags +
                                ", the guardrails (--health-url, --health-max-latency, --interval, "
                                "--prometheus-url, --query, --kernel-signal, --abort-above/--abort-below) and "
                                "--hypothesis, --steady-state");
  }
  return {};
}

Result<nlohmann::json> syscall_spec_of(const SyscallRunArgs& a, const std::vector<std::string>& args) {
  const auto given = given_flags(args);
  FL_TRY(refuse_uncarried(given,
                          {"syscall", "errno", "percent", "duration", "cgroup", "pid", "via", "after", "max-injections",
                           "start-after", "include-loader"},
                          "--syscall, --errno, --percent, --duration, --cgroup or --pid, --via, --after, "
                          "--max-injections, --start-after, --include-loader"));
  const auto has = given_test(given);
  const SyscallFaultSpec& s = a.spec;
  std::string names;
  for (const auto& n : s.syscalls) names += (names.empty() ? "" : ",") + n;
  nlohmann::json spec{{"kind", "syscall"}, {"syscall", names}, {"errno", errno_name(s.err)}};
  auto secs = whole_units(s.duration_ns, 1'000'000'000ULL, "--duration");
  if (!secs) return secs.error();
  spec["duration_sec"] = *secs;
  if (has("percent")) spec["percent"] = s.percent;
  if (!s.cgroup.empty()) spec["cgroup"] = s.cgroup;
  if (s.pid != 0) spec["pid"] = s.pid;
  if (!s.via.empty()) spec["via"] = s.via;
  if (s.after) spec["after"] = s.after;
  if (s.max_injections) spec["max_injections"] = s.max_injections;
  if (s.start_after_ns) {
    auto ms = whole_units(s.start_after_ns, 1'000'000ULL, "--start-after");
    if (!ms) return ms.error();
    spec["start_after_ms"] = *ms;
  }
  if (s.include_loader) spec["include_loader"] = true;
  FL_TRY(add_run_flags(spec, a.flags));
  return spec;
}

Result<nlohmann::json> resource_spec_of(const ResourceRunArgs& a, const std::vector<std::string>& args) {
  const auto given = given_flags(args);
  std::vector<std::string> carried = {"duration"};
  for (const auto& f : resource_specific_flags()) carried.push_back(f);
  FL_TRY(refuse_uncarried(given, carried, "--duration and the flags of the kind"));
  const auto has = given_test(given);
  const ResourceSpec& s = a.spec;
  nlohmann::json spec{{"kind", resource_kind_name(s.kind)}};
  auto secs = whole_units(s.duration_ns, 1'000'000'000ULL, "--duration");
  if (!secs) return secs.error();
  spec["duration_sec"] = *secs;
  if (s.pid) spec["pid"] = *s.pid;
  if (!s.name.empty()) spec["name"] = s.name;
  if (!s.cgroup.empty()) spec["cgroup"] = s.cgroup;
  if (s.kind == ResourceKind::Process) {
    spec["action"] = s.action == ProcessAction::Freeze ? "freeze" : "kill";
    if (has("signal")) spec["signal"] = signal_name(s.signal);
    if (s.force) spec["force"] = true;
  }
  if (s.kind == ResourceKind::Cpu) {
    spec["cores"] = s.cores;
    if (has("load")) spec["load"] = s.load;
  }
  if (has("size")) spec["size"] = std::to_string(s.size_bytes);
  if (!s.path.empty()) spec["path"] = s.path;
  if (s.fill_percent) spec["fill"] = *s.fill_percent;
  if (has("min-free")) spec["min_free"] = std::to_string(s.min_free_bytes);
  FL_TRY(add_run_flags(spec, a.flags));
  return spec;
}

// What tcp and http specs share: the cgroup, the drain and the run's flags.
Status add_stream_fields(nlohmann::json& spec, const TcpFaultSpec& s, const RunFlags& flags,
                         const std::function<bool(const char*)>& has) {
  if (!s.cgroup.empty()) spec["cgroup"] = s.cgroup;
  if (has("drain")) {
    auto ms = whole_units(s.drain_ns, 1'000'000ULL, "--drain");
    if (!ms) return ms.error();
    spec["drain_ms"] = *ms;
  }
  return add_run_flags(spec, flags);
}

Result<nlohmann::json> tcp_spec_of(const TcpRunArgs& a, const std::vector<std::string>& args) {
  const auto given = given_flags(args);
  FL_TRY(refuse_uncarried(given, {"target", "toxic", "direction", "toxicity", "cgroup", "drain", "duration"},
                          "--target, --toxic, --direction, --toxicity, --cgroup, --drain, --duration"));
  const auto has = given_test(given);
  const TcpFaultSpec& s = a.spec;
  // The --toxic texts as written (cxxopts splits them at commas).
  std::vector<std::string> toxics;
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--toxic" && i + 1 < args.size())
      toxics.push_back(args[++i]);
    else if (args[i].rfind("--toxic=", 0) == 0)
      toxics.push_back(args[i].substr(8));
  }
  nlohmann::json spec{{"kind", "tcp"}, {"target", s.target.text}, {"toxic", toxics}};
  auto secs = whole_units(s.duration_ns, 1'000'000'000ULL, "--duration");
  if (!secs) return secs.error();
  spec["duration_sec"] = *secs;
  for (const char* f : {"direction", "toxicity"}) {
    for (size_t i = 0; i + 1 < args.size() && args[i] != "--"; ++i) {
      if (args[i] != std::string("--") + f) continue;
      if (std::string(f) == "toxicity") {
        spec[f] = std::strtod(args[i + 1].c_str(), nullptr);  // parsed and checked by parse_tcp_args
      } else {
        spec[f] = args[i + 1];
      }
    }
    if (has(f) && !spec.contains(f))
      return input_error(0, std::string("--") + f + ": give it as --" + f + " VALUE for the control plane");
  }
  FL_TRY(add_stream_fields(spec, s, a.flags, has));
  return spec;
}

Result<nlohmann::json> http_spec_of(const TcpRunArgs& a, const std::vector<std::string>& args) {
  const auto given = given_flags(args);
  FL_TRY(refuse_uncarried(given, {"target",          "method",      "path",     "host",         "header-equals",
                                  "header-contains", "status",      "body",     "content-type", "delay",
                                  "delay-at",        "reset",       "truncate", "abort-stream", "llm",
                                  "llm-provider",    "retry-after", "percent",  "attempts",     "tls",
                                  "terminate-tls",   "upstream-ca", "cgroup",   "drain",        "duration"},
                          "--target, the fault (--status, --delay, --reset, --truncate, --abort-stream, --llm) and "
                          "its flags, the match (--method, --path, --host, --header-equals, --header-contains), "
                          "--percent, --attempts, --tls, --terminate-tls, --upstream-ca, --cgroup, --drain, "
                          "--duration"));
  const auto has = given_test(given);
  // A flag's value as written (the last of --flag V or --flag=V).
  auto written = [&](const std::string& f) {
    std::string v;
    for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
      if (args[i] == "--" + f && i + 1 < args.size())
        v = args[++i];
      else if (args[i].rfind("--" + f + "=", 0) == 0)
        v = args[i].substr(f.size() + 3);
    }
    return v;
  };
  const TcpFaultSpec& s = a.spec;
  const HttpFault& f = s.http_faults.front();  // parse_http_args made exactly one
  nlohmann::json spec{{"kind", "http"}, {"target", s.target.text}};
  auto secs = whole_units(s.duration_ns, 1'000'000'000ULL, "--duration");
  if (!secs) return secs.error();
  spec["duration_sec"] = *secs;
  switch (f.type) {
    case HttpFaultType::status:
      spec["status"] = f.status;
      if (has("body")) spec["body"] = f.body;
      if (has("content-type")) spec["content_type"] = f.content_type;
      break;
    case HttpFaultType::delay:
      spec["delay_ms"] = f.delay_ms;
      if (has("delay-at")) spec["delay_at"] = written("delay-at");
      break;
    case HttpFaultType::reset:
      spec["reset"] = true;
      break;
    case HttpFaultType::truncate:
      spec["truncate"] = f.bytes;
      break;
    case HttpFaultType::abort_stream:
      spec["abort_stream"] = f.events;
      break;
    case HttpFaultType::llm:
      spec["llm"] = written("llm");
      if (has("llm-provider")) spec["llm_provider"] = written("llm-provider");
      if (has("retry-after")) spec["retry_after"] = f.retry_after_s;
      break;
  }
  if (has("method")) spec["method"] = f.match.method;
  if (has("path")) spec["path"] = f.match.path;
  if (has("host")) spec["host"] = f.match.host;
  for (const auto& h : f.match.headers)
    spec[h.has_equals ? "header_equals" : "header_contains"].push_back(h.name + "=" +
                                                                       (h.has_equals ? h.equals : h.contains));
  if (has("percent")) spec["percent"] = f.percent;
  if (has("attempts")) spec["attempts"] = f.attempts;
  if (has("tls")) spec["tls"] = true;
  if (s.terminate_tls) spec["terminate_tls"] = true;
  if (!s.upstream_ca.empty()) spec["upstream_ca"] = s.upstream_ca;
  FL_TRY(add_stream_fields(spec, s, a.flags, has));
  return spec;
}

int remote_run(const Remote& r, std::vector<std::string> args) {
  const std::string who = "faultctl run";
  // Where it runs: --agent ID or --hostname NAME (repeatable); --detach: submit only.
  std::optional<int64_t> agent;
  std::vector<std::string> hostnames;
  bool detach = false;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "--detach") {
      detach = true;
    } else if (w == "--agent" || w == "--hostname") {
      if (i + 1 >= args.size()) {
        std::cerr << who << ": " << w << " needs a value\n";
        return kExitBadInput;
      }
      const std::string v = args[++i];
      if (w == "--hostname") {
        hostnames.push_back(v);
      } else if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
        std::cerr << who << ": --agent '" << v << "': not an agent id\n";
        return kExitBadInput;
      } else {
        agent = std::stoll(v);
      }
    } else {
      rest.push_back(w);
    }
  }
  auto submit = [&](const RunFlags& flags, const std::function<Result<nlohmann::json>()>& make_spec) -> int {
    if (agent.has_value() == !hostnames.empty()) {
      std::cerr << who << ": name where it runs: --agent ID or --hostname NAME (repeatable), one of them\n";
      return kExitBadInput;
    }
    if (flags.dry_run) {
      std::cerr << who << ": --dry-run is local; the control plane checks a spec when it is submitted\n";
      return kExitBadInput;
    }
    auto spec = make_spec();
    if (!spec) return report_error(who, spec.error());
    nlohmann::json body{{"spec", *spec}};
    if (agent)
      body["agent_id"] = *agent;
    else
      body["selector"] = {{"hostnames", hostnames}};
    auto answer = r.call("POST", "/v1/experiments", body.dump());
    if (!answer) {
      std::cerr << who << ": " << answer.error().describe() << "\n";
      return kExitFailure;
    }
    if (answer->response.status.code != 201) return refused(who, *answer);
    auto j = nlohmann::json::parse(answer->response.body, nullptr, false);
    std::vector<nlohmann::json> made;
    if (j.contains("experiments")) {
      for (const auto& e : j["experiments"]) made.push_back(e);
    } else {
      made.push_back(j);
    }
    for (const auto& e : made) {
      if (flags.json)
        std::cout << nlohmann::json{{"event", "submitted"},
                                    {"id", e["id"]},
                                    {"agent_id", e["agent_id"]},
                                    {"state", e["status"]}}
                         .dump()
                  << std::endl;
      else
        std::cout << "experiment " << e.value("id", 0) << " submitted to agent " << e.value("agent_id", 0) << " ("
                  << e.value("status", "") << ")" << std::endl;
    }
    if (detach) return kExitCompleted;
    // Followed one after the other; the exit code is the first that is not 0.
    int first = kExitCompleted;
    for (const auto& e : made) {
      const int code = follow(r, e.value("id", int64_t{0}), flags.json);
      if (first == kExitCompleted) first = code;
    }
    return first;
  };
  if (!rest.empty() && rest[0] == "syscall") {
    const std::vector<std::string> words(rest.begin() + 1, rest.end());
    return run_command(who, parse_syscall_args(words), kRootNever,
                       [&](SyscallRunArgs& a) { return submit(a.flags, [&] { return syscall_spec_of(a, words); }); });
  }
  if (!rest.empty() && rest[0] == "tcp") {
    const std::vector<std::string> words(rest.begin() + 1, rest.end());
    return run_command(who, parse_tcp_args(words), kRootNever,
                       [&](TcpRunArgs& a) { return submit(a.flags, [&] { return tcp_spec_of(a, words); }); });
  }
  if (!rest.empty() && rest[0] == "http") {
    const std::vector<std::string> words(rest.begin() + 1, rest.end());
    return run_command(who, parse_http_args(words), kRootNever,
                       [&](TcpRunArgs& a) { return submit(a.flags, [&] { return http_spec_of(a, words); }); });
  }
  if (!rest.empty() && is_resource_kind(rest[0]))
    return run_command(who, parse_resource_args(rest), kRootNever,
                       [&](ResourceRunArgs& a) { return submit(a.flags, [&] { return resource_spec_of(a, rest); }); });
  return run_command(who, parse_packet_args(rest), kRootNever,
                     [&](PacketRunArgs& a) { return submit(a.flags, [&] { return spec_of(a); }); });
}

// What an experiment acts on, for the TARGET column: the target of a packet or
// tcp fault, else a syscall or resource fault's cgroup, pid, name or path.
std::string scope_of(const nlohmann::json& spec) {
  for (const char* f : {"target", "cgroup", "name", "path"})
    if (spec.contains(f) && spec[f].is_string()) return spec[f].get<std::string>();
  if (spec.contains("pid") && spec["pid"].is_number_integer())
    return "pid " + std::to_string(spec["pid"].get<int64_t>());
  return "";
}

int remote_list(const Remote& r, const std::vector<std::string>& args) {
  const std::string who = "faultctl list";
  return run_command(who, parse_switches(args, {"--json"}, "usage: faultctl --control-plane URL list [--json]\n"),
                     kRootNever, [&](Switches& s) -> int {
                       auto a = r.call("GET", "/v1/experiments?limit=100");
                       if (!a) {
                         std::cerr << who << ": " << a.error().describe() << "\n";
                         return kExitFailure;
                       }
                       if (a->response.status.code != 200) return refused(who, *a);
                       auto j = nlohmann::json::parse(a->response.body, nullptr, false);
                       if (s.has("--json")) {
                         std::cout << j.dump() << "\n";
                         return kExitCompleted;
                       }
                       std::cout << std::left << std::setw(6) << "ID" << std::setw(7) << "AGENT" << std::setw(16)
                                 << "STATE" << std::setw(11) << "KIND" << std::setw(20) << "TARGET"
                                 << "DETAIL\n";
                       for (const auto& e : j.value("experiments", nlohmann::json::array())) {
                         const auto& spec = e.value("spec", nlohmann::json::object());
                         std::cout << std::setw(6) << e.value("id", 0) << std::setw(7) << e.value("agent_id", 0)
                                   << std::setw(16) << e.value("status", "") << std::setw(11) << spec.value("kind", "")
                                   << std::setw(20) << scope_of(spec) << e.value("detail", "") << "\n";
                       }
                       return kExitCompleted;
                     });
}

// faultctl --control-plane URL policy put|apply FILE [--dry-run] [--all |
// --label K=V ... | --hostname H ...], get, export [--format yaml|json]: the
// workspace's policy bundle (docs/control-plane.md, "Policy"). No selector
// flag keeps the selector of the newest version (all agents at first).
int remote_policy(const Remote& r, const std::vector<std::string>& args) {
  const std::string who = "faultctl policy";
  const char* usage =
      "usage: faultctl --control-plane URL policy put FILE [--all | --label K=V... | --hostname H...]\n"
      "       faultctl --control-plane URL policy apply FILE [--dry-run] [--all | --label K=V... | --hostname H...]\n"
      "       faultctl --control-plane URL policy get\n"
      "       faultctl --control-plane URL policy export [--format yaml|json]\n";
  auto bad = [&](const std::string& why) {
    std::cerr << who << ": " << why << "\n" << usage;
    return kExitBadInput;
  };
  if (args.empty()) return bad("missing the action");
  const std::string action = args[0];
  std::string file, format = "json";
  bool dry_run = false, all = false;
  nlohmann::json labels = nlohmann::json::object(), hostnames = nlohmann::json::array();
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    if (a == "--dry-run" && action == "apply") {
      dry_run = true;
    } else if (a == "--all" && (action == "put" || action == "apply")) {
      all = true;
    } else if ((a == "--label" || a == "--hostname") && (action == "put" || action == "apply")) {
      auto v = value();
      if (!v) return bad(a + " needs a value");
      if (a == "--hostname") {
        hostnames.push_back(*v);
      } else {
        const auto eq = v->find('=');
        if (eq == std::string::npos) return bad("--label " + *v + ": expected KEY=VALUE");
        labels[v->substr(0, eq)] = v->substr(eq + 1);
      }
    } else if (a == "--format" && action == "export") {
      auto v = value();
      if (!v || (*v != "yaml" && *v != "json")) return bad("--format takes yaml or json");
      format = *v;
    } else if (!a.empty() && a[0] != '-' && file.empty() && (action == "put" || action == "apply")) {
      file = a;
    } else {
      return bad("unexpected argument '" + a + "'");
    }
  }
  auto answer = [&](const Result<HttpAnswer>& a, int ok_status) -> std::optional<int> {
    if (!a) {
      std::cerr << who << " " << action << ": " << a.error().describe() << "\n";
      return kExitFailure;
    }
    if (a->response.status.code != ok_status && a->response.status.code != 200) return refused(who + " " + action, *a);
    return std::nullopt;
  };
  if (action == "get" || action == "export") {
    auto a = r.call("GET", action == "get" ? "/v1/policy" : "/v1/policy/export?format=" + format);
    if (auto code = answer(a, 200)) return *code;
    if (action == "get") {
      std::cout << nlohmann::json::parse(a->response.body, nullptr, false).dump(2) << "\n";
    } else {
      std::cout << a->response.body;
    }
    return kExitCompleted;
  }
  if (action != "put" && action != "apply") return bad("not a policy action of the control plane: " + action);
  if (file.empty()) return bad("missing the policy FILE");
  if (all && (!labels.empty() || !hostnames.empty())) return bad("--all takes no --label or --hostname beside it");
  auto text = read_policy_text(file);
  if (!text) return report_error(who, text.error());
  nlohmann::json body{{"policy", *text}};
  if (all) body["selector"] = {{"all", true}};
  if (!labels.empty()) body["selector"]["labels"] = labels;
  if (!hostnames.empty()) body["selector"]["hostnames"] = hostnames;
  if (dry_run) body["dry_run"] = true;
  auto a = r.call(action == "put" ? "PUT" : "POST", action == "put" ? "/v1/policy" : "/v1/policy/apply", body.dump());
  if (auto code = answer(a, 201)) return *code;
  auto j = nlohmann::json::parse(a->response.body, nullptr, false);
  if (j.is_discarded()) j = nlohmann::json::object();
  const std::string version = j.contains("version") ? j["version"].dump() : "?";
  if (dry_run) {
    std::cout << "dry run: " << (j.value("changed", false) ? "would store version " : "unchanged, version ") << version;
  } else {
    std::cout << (j.value("changed", false) ? "stored version " : "unchanged, version ") << version;
  }
  std::cout << " of policy " << j.value("name", "") << ", selector " << j.value("selector", nlohmann::json()).dump();
  if (j.contains("agents")) {
    std::cout << "; agents:";
    if (j["agents"].empty()) std::cout << " none yet";
    for (const auto& ag : j["agents"]) std::cout << " " << ag.value("hostname", "") << " (" << ag.value("id", 0) << ")";
  }
  std::cout << "\n";
  return kExitCompleted;
}

// faultctl --control-plane URL apply -f FILE [--json]: a Chaos Mesh document
// whose selectors faultcp resolves against its services and agents
// (docs/policy.md, "Chaos Mesh through faultcp"): one experiment per drawn
// instance or agent.
int remote_apply(const Remote& r, const std::vector<std::string>& args) {
  const std::string who = "faultctl apply";
  const char* usage = "usage: faultctl apply -f FILE --control-plane URL [--json]\n";
  std::string file;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "-f" || args[i] == "--filename") && i + 1 < args.size() && file.empty()) {
      file = args[++i];
    } else if (args[i] == "--json") {
      json = true;
    } else {
      std::cerr << who << ": "
                << (args[i] == "--cgroup" ? "--cgroup is local: faultcp takes each instance's cgroup "
                                            "from its registered service"
                                          : "unexpected argument '" + args[i] + "'")
                << "\n"
                << usage;
      return kExitBadInput;
    }
  }
  if (file.empty()) {
    std::cerr << who << ": missing -f FILE\n" << usage;
    return kExitBadInput;
  }
  auto text = read_policy_text(file);
  if (!text) return report_error(who, text.error());
  auto a = r.call("POST", "/v1/chaos-mesh", *text, "application/yaml");
  if (!a) {
    std::cerr << who << ": " << a.error().describe() << "\n";
    return kExitFailure;
  }
  if (a->response.status.code != 201) return refused(who, *a);
  auto j = nlohmann::json::parse(a->response.body, nullptr, false);
  if (json || !j.is_object()) {
    std::cout << a->response.body << "\n";
    return kExitCompleted;
  }
  const auto& d = j["draw"];
  std::cout << "mode " << d.value("mode", "") << " drew " << d.value("picked", 0) << " of " << d.value("matched", 0)
            << " matches\n";
  for (const auto& e : j["experiments"]) {
    const auto& spec = e.contains("spec") ? e["spec"] : nlohmann::json::object();
    std::cout << "experiment " << e.value("id", 0) << " on agent " << e.value("agent_id", 0) << " "
              << (spec.contains("cgroup") ? "in " + spec.value("cgroup", "") : std::string("host-wide")) << "\n";
  }
  for (const auto& n : j["notes"]) std::cerr << who << ": note: " << n.get<std::string>() << "\n";
  return kExitCompleted;
}

Result<int64_t> experiment_id(const std::string& who, const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0].empty() || args[0].size() > 18 ||
      args[0].find_first_not_of("0123456789") != std::string::npos)
    return input_error(0, "usage: faultctl --control-plane URL " + who + " EXPERIMENT-ID");
  return std::stoll(args[0]);
}

}  // namespace

int cmd_remote(const std::string& name, const std::vector<std::string>& args, const std::string& url,
               const std::string& token) {
  const std::string who = "faultctl " + name;
  auto link = CpLink::create(url, token, {.timeout_ms = kCallTimeoutMs});
  if (!link) {
    std::cerr << who << ": " << link.error().message << "\n";
    return link.error().bad_input ? kExitBadInput : kExitFailure;
  }
  const Remote& r = *link;
  if (name == "run") return remote_run(r, args);
  if (name == "list") return remote_list(r, args);
  if (name == "policy") return remote_policy(r, args);
  if (name == "apply") return remote_apply(r, args);
  if (name == "watch" || name == "abort") {
    const bool json = std::find(args.begin(), args.end(), "--json") != args.end();
    std::vector<std::string> words;
    for (const auto& a : args)
      if (a != "--json") words.push_back(a);
    auto id = experiment_id(name, words);
    if (!id) {
      std::cerr << who << ": " << id.error().message << "\n";
      return kExitBadInput;
    }
    if (name == "watch") return follow(r, *id, json);
    auto a = r.call("POST", "/v1/experiments/" + std::to_string(*id) + "/abort");
    if (!a) {
      std::cerr << who << ": " << a.error().describe() << "\n";
      return kExitFailure;
    }
    if (a->response.status.code != 200) return refused(who, *a);
    if (json)
      std::cout << a->response.body << "\n";
    else
      std::cout << "experiment " << *id << " cancelled; its agent ends it at once\n";
    return kExitCompleted;
  }
  std::cerr << who << ": not a command of the control plane (run, list, watch, abort, policy, apply)\n";
  return kExitBadInput;
}

}  // namespace faultline
