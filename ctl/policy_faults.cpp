// Experiments as data, judged by the same code as `faultctl run`: the fields a
// family accepts are read from its parser's own option list (flag_table()), the
// values go through its parser as the flags they name.
#include "ctl/policy_faults.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <variant>

#include "ctl/packet_args.h"
#include "ctl/resource_args.h"
#include "ctl/syscall_args.h"
#include "userspace/faults/packet/spec.h"

namespace faultline {
namespace {

enum class FaultFamily { Packet, Syscall, Resource };

std::optional<FaultFamily> family_of(const std::string& kind) {
  if (kind == "syscall") return FaultFamily::Syscall;
  if (kind == "process" || kind == "cpu" || kind == "memory" || kind == "disk") return FaultFamily::Resource;
  if (kind_from_name(kind)) return FaultFamily::Packet;
  return std::nullopt;
}

std::vector<std::string> all_kinds() {
  std::vector<std::string> k = kind_names();
  for (const char* n : {"syscall", "process", "cpu", "memory", "disk"}) k.emplace_back(n);
  return k;
}

// Flags of a run command that belong to an invocation, not to an experiment.
const std::set<std::string> kInvocationFlags = {"help", "json", "dry-run", "kind"};

// name -> takes a value, read from the family's own options.
const FlagTable& flags_of(FaultFamily f) {
  static const FlagTable packet = packet_run_flags();
  static const FlagTable syscall = syscall_run_flags();
  static const FlagTable resource = resource_run_flags();
  switch (f) {
    case FaultFamily::Packet:
      return packet;
    case FaultFamily::Syscall:
      return syscall;
    case FaultFamily::Resource:
      break;
  }
  return resource;
}

// "--percent: 'x' ..." -> the first field of e the message names as a flag.
const FaultField* named_field(const FaultEntry& e, const std::string& message) {
  const FaultField* best = nullptr;
  size_t best_at = std::string::npos;
  for (const auto& f : e.fields) {
    const std::string flag = "--" + f.name;
    for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
      const size_t end = at + flag.size();
      const bool whole =
          end == message.size() || !(std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '-');
      if (whole && at < best_at) {
        best = &f;
        best_at = at;
      }
      if (whole) break;
    }
  }
  return best;
}

// A packet target that is not an address or CIDR is a host name, which
// `faultctl run` resolves at once; a policy check resolves nothing.
std::optional<std::string> host_target(const std::string& t) {
  std::string host = t;
  if (!t.empty() && t.front() == '[') return std::nullopt;
  if (std::count(t.begin(), t.end(), ':') == 1) host = t.substr(0, t.find(':'));
  if (host.empty() || parse_prefix(host)) return std::nullopt;
  if (host.find('/') != std::string::npos || host.find_first_not_of("0123456789.") == std::string::npos)
    return std::nullopt;  // a malformed address: the run parser says why
  return host;
}

}  // namespace

std::vector<std::string> run_words(const FaultEntry& e) {
  std::vector<std::string> words;
  auto fam = family_of(e.kind);
  if (fam != FaultFamily::Syscall) words.push_back(e.kind);
  static const FlagTable kNone;
  const FlagTable& flags = fam ? flags_of(*fam) : kNone;
  for (const auto& f : e.fields) {
    auto it = flags.find(f.name);
    const bool takes_value = it == flags.end() || it->second;
    if (!takes_value) {
      if (f.is_switch) words.push_back("--" + f.name);
      continue;  // false: the switch left off
    }
    for (const auto& v : f.values) {
      words.push_back("--" + f.name);
      words.push_back(v);
    }
  }
  if (!e.command.empty()) {
    words.push_back("--");
    words.insert(words.end(), e.command.begin(), e.command.end());
  }
  return words;
}

PolicyParse parse_policy_bounded(std::string_view text, const FaultChecker& check, const std::string& who,
                                 const std::string& file, int seconds) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    if (cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return done; })) return;
    const std::string line = who + ": " + file + ": the YAML parser did not finish in " + std::to_string(seconds) +
                             " s (yaml-cpp 0.7 loops on some malformed flow mappings): fix the file's syntax\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(2);
  });
  PolicyParse p = parse_policy(text, check);
  {
    std::lock_guard lock(m);
    done = true;
  }
  cv.notify_one();
  watchdog.join();
  return p;
}

FaultChecker run_fault_checker() {
  return [](const FaultEntry& e, const std::string& path) {
    std::vector<PolicyDiagnostic> out;
    auto fam = family_of(e.kind);
    if (!fam) {
      std::string why = "unknown fault kind '" + e.kind + "'";
      if (auto near = closest_name(e.kind, all_kinds()); !near.empty())
        why += " (did you mean '" + near + "'?)";
      else
        why +=
            " (loss, partition, flowdrop, corrupt, duplicate, dns, latency, bandwidth, syscall, process, cpu, memory, "
            "disk)";
      out.push_back({e.kind_mark, path + ".kind", why});
      return out;
    }
    const auto& flags = flags_of(*fam);
    std::vector<std::string> known = {"name", "kind"};
    if (*fam == FaultFamily::Syscall) known.push_back("command");
    for (const auto& [name, _] : flags) {
      if (!kInvocationFlags.contains(name)) known.push_back(name);
    }
    for (const auto& f : e.fields) {
      const std::string at = path + "." + f.name;
      if (kInvocationFlags.contains(f.name)) {
        out.push_back({f.mark, at, "'" + f.name + "' is an option of one faultctl invocation, not of an experiment"});
        continue;
      }
      auto it = flags.find(f.name);
      if (it == flags.end()) {
        std::string why = "unknown field '" + f.name + "' for a " + e.kind + " fault";
        if (auto near = closest_name(f.name, known); !near.empty()) why += " (did you mean '" + near + "'?)";
        out.push_back({f.mark, at, why});
        continue;
      }
      if (!it->second && !f.is_switch && !(f.values.size() == 1 && f.values[0] == "false" && !f.is_list))
        out.push_back({f.value_marks.empty() ? f.mark : f.value_marks[0], at, "expected true or false"});
      if (*fam == FaultFamily::Packet && f.name == "target") {
        for (size_t i = 0; i < f.values.size(); ++i) {
          if (auto host = host_target(f.values[i]))
            out.push_back({f.value_marks[i], f.is_list ? at + "[" + std::to_string(i) + "]" : at,
                           "'" + *host +
                               "' is a host name: a policy names fault targets by address or CIDR "
                               "(resolving names when the policy is read is not implemented)"});
        }
      }
    }
    if (!e.command.empty() && *fam != FaultFamily::Syscall)
      out.push_back({e.mark, path + ".command", "only a syscall fault wraps a command"});
    if (!out.empty()) return out;
    const auto words = run_words(e);
    Status st;
    switch (*fam) {
      case FaultFamily::Packet:
        if (auto r = parse_packet_args(words); !r) st = r.error();
        break;
      case FaultFamily::Syscall:
        if (auto r = parse_syscall_args(words); !r) st = r.error();
        break;
      case FaultFamily::Resource:
        if (auto r = parse_resource_args(words); !r) st = r.error();
        break;
    }
    if (!st) {
      const std::string& m = st.error().message;
      if (const FaultField* f = named_field(e, m))
        out.push_back({f->value_marks.size() == 1 ? f->value_marks[0] : f->mark, path + "." + f->name, m});
      else if (m.find("-- COMMAND") != std::string::npos || m.find("command") != std::string::npos)
        out.push_back({e.mark, path + ".command", m});
      else
        out.push_back({e.mark, path, m});
    }
    return out;
  };
}

}  // namespace faultline
