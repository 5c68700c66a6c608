// The field tables of the typed experiment (each family's experiment.cpp)
// against the three doors an experiment comes in by: `faultctl run` (its argv
// parser), faultd (a served run's request, and its agent's run of a dispatched
// experiment) and faultcp (the check of a submitted spec). For every field
// with a range, of every family (packet, syscall, resource, tcp, http), the values just outside it are refused by
// all three with the same message (the CLI names the flag where the others
// name the field and its flag), and the ends of the range are taken by all
// three. The cases are made from the tables: a new ranged row is covered
// without a new line here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>

#include "cp/api/experiment_spec.h"
#include "ctl/http_args.h"
#include "ctl/packet_args.h"
#include "ctl/resource_args.h"
#include "ctl/syscall_args.h"
#include "ctl/tcp_args.h"
#include "parse_words.h"
#include "userspace/daemon/remote_experiment.h"
#include "userspace/daemon/served_run.h"
#include "userspace/faults/experiment_guardrails.h"
#include "userspace/faults/packet/experiment.h"
#include "userspace/faults/resource/experiment.h"
#include "userspace/faults/stream/experiment.h"
#include "userspace/faults/syscall/experiment.h"

namespace faultline {
namespace {

// A parse of `faultctl run KIND ...`'s words: empty, or the CLI's error.
using CliParse = std::function<std::optional<std::string>(const nlohmann::json& spec, std::vector<std::string>)>;

template <typename Args>
std::optional<std::string> cli_error(Result<Parsed<Args>> r) {
  auto a = args_of(std::move(r));
  if (a) return std::nullopt;
  return a.error().message;
}

struct Family {
  std::string name;
  std::span<const ExperimentField> fields;
  std::span<const ExperimentField> also;  // the rows of other fields the bases carry
  std::vector<nlohmann::json> bases;      // good experiments; a field is tried on the first that takes its range
  CliParse cli;
};

// A JSON value of a field as its flag's words: a duration with its unit, a
// rate in bits.
std::string flag_text(const ExperimentField& f, const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  const std::string unit = f.unit;
  std::string n = v.dump();
  if (unit == "s" || unit == "ms") return n + unit;
  if (unit == "bit/s") return n + "bit";
  return n;
}

// The command line of an experiment: each field's flag and value, the
// guardrails' from their table (the kind is the parser's to place).
std::vector<std::string> flags_of(const Family& fam, const nlohmann::json& spec) {
  std::vector<std::string> words;
  for (const auto& item : spec.items()) {
    if (item.key() == "kind") continue;
    const ExperimentField* f = find_field(fam.fields, item.key());
    if (f == nullptr) f = find_field(fam.also, item.key());
    if (f == nullptr) f = find_field(guardrail_fields(), item.key());
    EXPECT_NE(f, nullptr) << item.key() << " is in no table";
    if (f == nullptr) continue;
    const std::string flag = std::string("--") + f->flag;
    if (f->kind == FieldKind::Switch) {
      if (item.value().get<bool>()) words.push_back(flag);
    } else if (item.value().is_array()) {
      for (const auto& x : item.value()) words.insert(words.end(), {flag, flag_text(*f, x)});
    } else {
      words.insert(words.end(), {flag, flag_text(*f, item.value())});
    }
  }
  return words;
}

// faultd's doors: the served run's request (packet faults), and its agent's
// run of an experiment the control plane dispatched (every family), which
// ends "failed" with the reader's error before anything is applied.
std::optional<std::string> faultd_served(const nlohmann::json& spec) {
  auto r = served_run_from_json(served_run_request(spec, AttachMode::Auto, false, Redactor{}, false));
  if (r) return std::nullopt;
  return r.error().message;
}

std::optional<std::string> faultd_agent(const nlohmann::json& spec) {
  std::promise<RemoteEnding> ended;
  RemoteExperiment::Hooks hooks;
  hooks.started = [](const std::string&, uint64_t) {};
  hooks.line = [](const nlohmann::json&) {};
  hooks.ended = [&](const RemoteEnding& e) { ended.set_value(e); };
  auto run = RemoteExperiment::start(1, spec, "", std::move(hooks));
  auto ending = ended.get_future();
  if (ending.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    run->stop("the test gives up");
    return "no ending within 30 s";
  }
  run->join();
  const RemoteEnding e = ending.get();
  if (e.record.value("outcome", "") != "bad-input") return std::nullopt;
  return e.detail;
}

// faultcp's door: the 400's "error", as its HTTP reply carries it.
std::optional<std::string> faultcp(const nlohmann::json& spec) {
  auto e = cp::check_experiment_spec(spec);
  if (!e) return std::nullopt;
  auto body = nlohmann::json::parse(e->reply().body);
  return body.value("error", "");
}

// "spec.percent (--percent): '300' is outside 0-100" is the CLI's "--percent
// '300' is outside 0-100" (the CLI's other flags named as their fields).
std::string as_cli_words(const std::string& door) {
  const auto open = door.find(" (--");
  const auto close = door.find("): ");
  if (door.rfind("spec.", 0) != 0 || open == std::string::npos || close == std::string::npos) return door;
  std::string words = door.substr(close + 3);
  return door.substr(open + 2, close - open - 2) + ": " + words;
}

std::string cli_as_door_words(std::string m, const Family& fam) {
  // The CLI's words after its flag, and its flags renamed to their fields
  // (spec_error_from_flags()'s renaming, longest flag first).
  std::vector<const ExperimentField*> rows;
  for (const auto& f : fam.fields) rows.push_back(&f);
  for (const auto& f : fam.also) rows.push_back(&f);
  for (const auto& f : guardrail_fields()) rows.push_back(&f);
  std::sort(rows.begin(), rows.end(),
            [](const ExperimentField* a, const ExperimentField* b) { return strlen(a->flag) > strlen(b->flag); });
  const auto flag_end = m.find_first_of(" :");
  std::string head = m.substr(0, flag_end);
  std::string rest = flag_end == std::string::npos ? "" : m.substr(flag_end);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == ':')) rest.erase(rest.begin());
  for (const ExperimentField* f : rows) {
    const std::string from = std::string("--") + f->flag, to = std::string("spec.") + f->field;
    for (size_t at = rest.find(from); at != std::string::npos; at = rest.find(from, at + to.size())) {
      const size_t end = at + from.size();
      if (end < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[end])) || rest[end] == '-')) continue;
      rest.replace(at, from.size(), to);
    }
  }
  return head + ": " + rest;
}

std::vector<Family> families() {
  auto packet = [](const nlohmann::json& spec, std::vector<std::string> flags) {
    flags.insert(flags.begin(), spec["kind"].get<std::string>());
    return cli_error(parse_packet_args(flags));
  };
  auto resource = [](const nlohmann::json& spec, std::vector<std::string> flags) {
    flags.insert(flags.begin(), spec["kind"].get<std::string>());
    return cli_error(parse_resource_args(flags));
  };
  auto syscall = [](const nlohmann::json&, std::vector<std::string> flags) {
    return cli_error(parse_syscall_args(flags));
  };
  auto tcp = [](const nlohmann::json&, std::vector<std::string> flags) { return cli_error(parse_tcp_args(flags)); };
  auto http = [](const nlohmann::json&, std::vector<std::string> flags) { return cli_error(parse_http_args(flags)); };
  const nlohmann::json loss = {{"kind", "loss"}, {"target", "10.0.0.2"}, {"percent", 10}, {"duration_sec", 30}};
  const nlohmann::json http_base = {{"kind", "http"}, {"target", "10.0.0.9:8080"}, {"duration_sec", 30}};
  auto with = [](nlohmann::json base, const char* field, nlohmann::json v) {
    base[field] = std::move(v);
    return base;
  };
  return {
      {"packet",
       packet_experiment_fields(),
       {},
       {loss,
        {{"kind", "latency"}, {"target", "10.0.0.2"}, {"delay_ms", 1000}, {"duration_sec", 30}},
        {{"kind", "bandwidth"}, {"target", "10.0.0.2"}, {"rate_bps", 10'000'000}, {"duration_sec", 30}}},
       packet},
      {"syscall",
       syscall_experiment_fields(),
       {},
       {{{"kind", "syscall"}, {"syscall", "connect"}, {"errno", "EIO"}, {"cgroup", "x"}, {"duration_sec", 30}},
        {{"kind", "syscall"}, {"syscall", "connect"}, {"errno", "EIO"}, {"pid", 4242}, {"duration_sec", 30}}},
       syscall},
      {"resource",
       resource_experiment_fields(),
       {},
       {{{"kind", "cpu"}, {"cores", 1}, {"duration_sec", 30}},
        {{"kind", "process"}, {"pid", 4242}, {"action", "kill"}, {"duration_sec", 30}},
        {{"kind", "memory"}, {"size", "64MiB"}, {"duration_sec", 30}},
        {{"kind", "disk"}, {"path", "/var/tmp"}, {"fill", 90}, {"duration_sec", 30}}},
       resource},
      {"tcp",
       tcp_experiment_fields(),
       {},
       {{{"kind", "tcp"}, {"target", "10.0.0.5:5432"}, {"toxic", {"noop"}}, {"duration_sec", 30}}},
       tcp},
      {"http",
       http_experiment_fields(),
       {},
       {with(http_base, "status", 503), with(http_base, "delay_ms", 100), with(http_base, "truncate", 10),
        with(http_base, "abort_stream", 2), with(http_base, "llm", "rate-limit")},
       http},
      // Not yet the shared guardrail rows: `faultctl run`'s guardrail flags
      // (ctl/run_flags.cpp) refuse in words of their own ("--interval must be
      // within 100ms-10m" where the reader says "spec.interval_sec: must be
      // within 1-600 (got 601)"), and --steady-state starts at 1s where
      // steady_state_sec starts at 0.

  };
}

// A value of field f in JSON: a whole number, or a number with a fraction
// when the range is that narrow.
nlohmann::json json_value(const ExperimentField& f, double v) {
  if (f.kind == FieldKind::Whole) return static_cast<uint64_t>(v);
  if (std::floor(v) == v) return static_cast<int64_t>(v);
  return v;
}

// Just inside each end of the range, and just outside (an open end is itself
// outside). A closed lower end of 0 has no outside in these units' words (a
// negative number is a flag to cxxopts), so it has none here.
struct Probe {
  std::vector<double> inside, outside;
};
Probe probe(const ExperimentField& f) {
  const FieldRange& r = *f.range;
  const double step = f.kind == FieldKind::Whole || r.hi - r.lo >= 10 ? 1 : (r.hi - r.lo) / 2;
  const double lo = f.kind == FieldKind::Whole ? std::ceil(r.lo) : r.lo;
  Probe p;
  p.inside.push_back(r.lo_open ? lo + step : lo);
  p.inside.push_back(r.hi_open ? r.hi - step : r.hi);
  p.outside.push_back(r.hi_open ? r.hi : r.hi + step);
  if (r.lo_open)
    p.outside.push_back(lo);
  else if (lo > 0)
    p.outside.push_back(lo - step);
  return p;
}

TEST(ExperimentFields, EveryRangedFieldIsRefusedAlikeByTheCliFaultdAndFaultcp) {
  size_t fields = 0, refused = 0;
  for (const Family& fam : families()) {
    for (const ExperimentField& f : fam.fields) {
      if (!f.range) continue;
      SCOPED_TRACE(fam.name + "." + f.field + " (--" + f.flag + ", " + field_range_text(f) + ")");
      const Probe p = probe(f);
      // The first base whose kind takes the field: every door takes both ends.
      const nlohmann::json* base = nullptr;
      std::string why_not;
      for (const auto& b : fam.bases) {
        bool all = true;
        for (double v : p.inside) {
          nlohmann::json spec = b;
          spec[f.field] = json_value(f, v);
          if (auto m = fam.cli(spec, flags_of(fam, spec)); m) why_not += "\n  faultctl: " + *m, all = false;
          if (auto m = faultcp(spec); m) why_not += "\n  faultcp: " + *m, all = false;
          if (fam.name == "packet")
            if (auto m = faultd_served(spec); m) why_not += "\n  faultd: " + *m, all = false;
        }
        if (all) {
          base = &b;
          break;
        }
      }
      ASSERT_NE(base, nullptr) << "no base experiment takes both ends of the range; the refusals: " << why_not;
      ++fields;
      for (double v : p.outside) {
        nlohmann::json spec = *base;
        spec[f.field] = json_value(f, v);
        SCOPED_TRACE(spec.dump());
        const auto words = flags_of(fam, spec);
        auto cli = fam.cli(spec, words);
        ASSERT_TRUE(cli.has_value()) << "faultctl run took it";
        auto cp = faultcp(spec);
        ASSERT_TRUE(cp.has_value()) << "faultcp took it";
        auto agent = faultd_agent(spec);
        ASSERT_TRUE(agent.has_value()) << "faultd's agent took it";
        // faultcp and faultd's agent: the reader's message (the agent's with the errno's words after it).
        EXPECT_EQ(agent->rfind(*cp, 0), 0u) << "faultd's agent: " << *agent << "\nfaultcp: " << *cp;
        const std::string tail = agent->substr(std::min(agent->size(), cp->size()));
        EXPECT_TRUE(tail.empty() || tail == std::string(": ") + strerror(EINVAL) ||
                    tail == std::string(": ") + strerror(ERANGE))
            << *agent;
        if (fam.name == "packet") {
          auto served = faultd_served(spec);
          ASSERT_TRUE(served.has_value()) << "faultd's served run took it";
          EXPECT_EQ(*served, *cp);
        }
        // The door names the field and its flag; the CLI's words are the same
        // from the flag on.
        EXPECT_EQ(cp->rfind(std::string("spec.") + f.field + " (--" + f.flag + "): ", 0), 0u) << *cp;
        EXPECT_EQ(as_cli_words(*cp), cli_as_door_words(*cli, fam)) << "faultctl: " << *cli;
        ++refused;
      }
    }
  }
  // Every family has ranged rows; a table that lost its ranges shows here.
  EXPECT_GE(fields, 25u);
  std::cout << fields << " ranged fields, " << refused << " out-of-range values refused alike by every door\n";
}

// Each family's --help shows every row's flag with the row's help and range:
// the options are made from the table.
TEST(ExperimentFields, TheCliHelpIsTheTables) {
  auto help_of = [](auto parsed) {
    EXPECT_TRUE(parsed.ok());
    return parsed.ok() && std::holds_alternative<HelpText>(*parsed) ? std::get<HelpText>(*parsed).text : "";
  };
  const std::vector<std::pair<std::span<const ExperimentField>, std::string>> cases = {
      {packet_experiment_fields(), help_of(parse_packet_args({"--help"}))},
      {syscall_experiment_fields(), help_of(parse_syscall_args({"--help"}))},
      {resource_experiment_fields(), help_of(parse_resource_args({"--help"}))},
      {tcp_experiment_fields(), help_of(parse_tcp_args({"--help"}))},
      {http_experiment_fields(), help_of(parse_http_args({"--help"}))},
  };
  for (const auto& [table, text] : cases) {
    // cxxopts wraps the descriptions: compare without the line breaks.
    std::string flat;
    for (char c : text) {
      if (c == '\n' || c == ' ') {
        if (!flat.empty() && flat.back() != ' ') flat += ' ';
      } else {
        flat += c;
      }
    }
    for (const auto& f : table) {
      if (std::string(f.field) == "kind" && std::string(f.flag) == "kind") continue;
      EXPECT_NE(flat.find(std::string("--") + f.flag), std::string::npos) << f.flag;
      if (f.range) EXPECT_NE(flat.find(flag_range_text(f)), std::string::npos) << f.flag << ": " << flag_range_text(f);
      const std::string words = f.help;
      EXPECT_NE(flat.find(words.substr(0, std::min<size_t>(words.size(), 40))), std::string::npos)
          << f.flag << ": " << f.help;
    }
  }
}

// docs/control-plane.md's tables of an experiment's fields say each row's
// range as the table has it (the row of a field in its family's section).
TEST(ExperimentFields, TheControlPlaneDocSaysTheTablesRanges) {
  std::ifstream in(std::string(FAULTLINE_SOURCE_DIR) + "/docs/control-plane.md");
  ASSERT_TRUE(in) << "docs/control-plane.md";
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // Each family's section: from its heading to the next.
  auto section = [&](const std::string& heading, const std::string& next) {
    std::vector<std::string> out;
    bool in_it = false;
    for (const auto& l : lines) {
      if (l == heading)
        in_it = true;
      else if (l == next)
        in_it = false;
      else if (in_it)
        out.push_back(l);
    }
    return out;
  };
  const std::vector<std::pair<std::span<const ExperimentField>, std::vector<std::string>>> cases = {
      {packet_experiment_fields(), section("### Experiments", "#### Syscall experiments")},
      {guardrail_fields(), section("### Experiments", "#### Syscall experiments")},
      {syscall_experiment_fields(), section("#### Syscall experiments", "#### Resource experiments")},
      {resource_experiment_fields(), section("#### Resource experiments", "#### TCP experiments")},
      {tcp_experiment_fields(), section("#### TCP experiments", "#### HTTP experiments")},
      {http_experiment_fields(), section("#### HTTP experiments", "### From faultctl")},
  };
  size_t checked = 0;
  for (const auto& [table, doc] : cases) {
    ASSERT_FALSE(doc.empty());
    for (const auto& f : table) {
      if (!f.range) continue;
      // The row whose first or second cell names the field.
      const std::string name = std::string("`") + f.field + "`";
      const std::string* row = nullptr;
      for (const auto& l : doc) {
        if (l.rfind("| ", 0) != 0) continue;
        const auto second = l.find('|', 1), third = l.find('|', second + 1);
        if (l.substr(0, third).find(name) != std::string::npos) {
          row = &l;
          break;
        }
      }
      ASSERT_NE(row, nullptr) << f.field << " has no row in docs/control-plane.md";
      EXPECT_NE(row->find(field_range_text(f)), std::string::npos)
          << f.field << ": the table says " << field_range_text(f) << ", the doc: " << *row;
      ++checked;
    }
  }
  EXPECT_GE(checked, 30u);
}

}  // namespace
}  // namespace faultline
