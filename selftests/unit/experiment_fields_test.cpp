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
#include <unistd.h>

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
#include "userspace/ops/experiment.h"

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
  };
}

// A value of field f in JSON: a whole number, a duration as its flag takes
// it (v in ms), or a number with a fraction when the range is that narrow.
nlohmann::json json_value(const ExperimentField& f, double v) {
  if (f.kind == FieldKind::Whole) return static_cast<uint64_t>(v);
  if (f.kind == FieldKind::Duration) return duration_field_text(static_cast<uint64_t>(std::llround(v * 1e6)));
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

// The shared rows (guardrails, record) on a family's first base, with what
// each needs: a health probe to time, a hypothesis for a steady state (with
// an interval short enough for its shortest one).
std::vector<nlohmann::json> guardrail_bases(const Family& fam, const ExperimentField& f) {
  nlohmann::json b = fam.bases.front();
  b["health_url"] = "http://127.0.0.1:9/healthz";
  if (std::string(f.field) == "steady_state") {
    b["hypothesis"] = "the service answers within 1 s";
    b["interval"] = "100ms";
  }
  return {b};
}

// The CLI's words for spec: a hypothesis is kept in a record, which the CLI
// names (a folder not made by parsing; an experiment's record folder is its
// runner's).
std::vector<std::string> cli_words(const Family& fam, const nlohmann::json& spec) {
  auto words = flags_of(fam, spec);
  if (spec.contains("hypothesis"))
    words.insert(words.end(), {"--record", "/tmp/fl-units-record-" + std::to_string(::getpid())});
  return words;
}

// faultd serves packet runs, and not a recorded one (a record is written by
// the faultctl that asked; faultd's agent writes its own, the door tried for
// every family).
bool served_takes(const Family& fam, const nlohmann::json& spec) {
  return fam.name == "packet" && !spec.contains("hypothesis");
}

TEST(ExperimentFields, EveryRangedFieldIsRefusedAlikeByTheCliFaultdAndFaultcp) {
  size_t fields = 0, refused = 0, shared = 0;
  for (const Family& fam : families()) {
    // The family's rows on its bases, then the shared rows on a base of its.
    std::vector<std::pair<const ExperimentField*, std::vector<nlohmann::json>>> rows;
    for (const ExperimentField& f : fam.fields) rows.emplace_back(&f, fam.bases);
    for (const ExperimentField& f : guardrail_fields())
      if (f.range) rows.emplace_back(&f, guardrail_bases(fam, f));
    for (const auto& [row, bases] : rows) {
      const ExperimentField& f = *row;
      if (!f.range) continue;
      const bool is_shared = find_field(guardrail_fields(), f.field) == &f;
      SCOPED_TRACE(fam.name + "." + f.field + " (--" + f.flag + ", " + field_range_text(f) + ")");
      const Probe p = probe(f);
      // The first base whose kind takes the field: every door takes both ends.
      const nlohmann::json* base = nullptr;
      std::string why_not;
      for (const auto& b : bases) {
        bool all = true;
        for (double v : p.inside) {
          nlohmann::json spec = b;
          spec[f.field] = json_value(f, v);
          if (auto m = fam.cli(spec, cli_words(fam, spec)); m) why_not += "\n  faultctl: " + *m, all = false;
          if (auto m = faultcp(spec); m) why_not += "\n  faultcp: " + *m, all = false;
          if (served_takes(fam, spec))
            if (auto m = faultd_served(spec); m) why_not += "\n  faultd: " + *m, all = false;
        }
        if (all) {
          base = &b;
          break;
        }
      }
      ASSERT_NE(base, nullptr) << "no base experiment takes both ends of the range; the refusals: " << why_not;
      ++fields;
      if (is_shared) ++shared;
      for (double v : p.outside) {
        nlohmann::json spec = *base;
        spec[f.field] = json_value(f, v);
        SCOPED_TRACE(spec.dump());
        const auto words = cli_words(fam, spec);
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
        if (served_takes(fam, spec)) {
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
  // The shared rows (interval, health_max_latency, steady_state) are tried
  // with every family.
  EXPECT_GE(fields, 25u);
  EXPECT_EQ(shared, 3 * families().size());
  std::cout << fields << " ranged fields, " << refused << " out-of-range values refused alike by every door\n";
}

// The guardrail durations are written as their flags take them ("250ms",
// "2m"), and the old spellings (a whole number under interval_sec,
// interval_ms, health_max_latency_ms, steady_state_sec) still read, so a
// stored experiment, a scenario file or a request written before them loads
// the same at every door; to_json writes the new form.
TEST(ExperimentFields, TheGuardrailDurationsAreTheFlagsWordsAndTheOldNumbersStillRead) {
  const nlohmann::json loss = {{"kind", "loss"},
                               {"target", "10.0.0.2"},
                               {"percent", 10},
                               {"duration_sec", 30},
                               {"health_url", "http://127.0.0.1:9/healthz"},
                               {"hypothesis", "the service answers"}};
  auto with = [&](std::initializer_list<std::pair<const char*, nlohmann::json>> fields) {
    nlohmann::json spec = loss;
    for (const auto& [k, v] : fields) spec[k] = v;
    return spec;
  };
  struct Read {
    uint64_t interval_ns, max_latency_ns, steady_ns;
  };
  auto read = [](const nlohmann::json& spec) -> Result<Read> {
    auto e = experiment_from_json(spec, "");
    if (!e) return e.error();
    EXPECT_TRUE(e->guardrails.health && e->record) << spec.dump();
    if (!e->guardrails.health || !e->record) return input_error(EINVAL, "no health probe or record");
    return Read{e->guardrails.health->interval_ns, e->guardrails.health->max_latency_ns, e->record->steady_state_ns};
  };
  const HealthProbeConfig defaults;
  struct Case {
    nlohmann::json spec;
    uint64_t interval_ns, max_latency_ns, steady_ns;
  };
  const std::vector<Case> cases = {
      {with({{"interval", "250ms"}, {"health_max_latency", "1500us"}, {"steady_state", "2m"}}), 250'000'000ULL,
       1'500'000ULL, 120'000'000'000ULL},
      {with({{"interval", "10m"}, {"health_max_latency", "60s"}, {"steady_state", "1s"}}), 600'000'000'000ULL,
       60'000'000'000ULL, 1'000'000'000ULL},
      // The old numbers, in their units.
      {with({{"interval_sec", 5}, {"health_max_latency_ms", 300}, {"steady_state_sec", 30}}), 5'000'000'000ULL,
       300'000'000ULL, 30'000'000'000ULL},
      {with({{"interval_ms", 250}}), 250'000'000ULL, defaults.max_latency_ns, 0},
      // steady_state_sec 0 was "none", and still is.
      {with({{"steady_state_sec", 0}}), defaults.interval_ns, defaults.max_latency_ns, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.spec.dump());
    auto r = read(c.spec);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->interval_ns, c.interval_ns);
    EXPECT_EQ(r->max_latency_ns, c.max_latency_ns);
    EXPECT_EQ(r->steady_ns, c.steady_ns);
    // faultcp takes it too (a stored experiment is checked again when it is dispatched).
    EXPECT_EQ(faultcp(c.spec), std::nullopt);
  }

  // What is refused, and in which words.
  const std::vector<std::pair<nlohmann::json, std::string>> refused = {
      {with({{"interval", 5}}),
       "spec.interval (--interval): must be a duration as --interval takes it, a string (\"2s\", \"250ms\", "
       "\"1m\")"},
      {with({{"interval", "5"}}), "spec.interval (--interval): '5' has no unit (write 30s, 500ms, 2m or 1h)"},
      {with({{"interval", "11m"}}), "spec.interval (--interval): '11m': must be within 100ms-10m"},
      {with({{"steady_state", "500ms"}}), "spec.steady_state (--steady-state): '500ms': must be within 1s-10m"},
      {with({{"interval", "2s"}, {"interval_sec", 2}}),
       "spec.interval_sec (--interval): is interval in other words: give one of them"},
      {with({{"interval_sec", 2}, {"interval_ms", 2000}}),
       "spec.interval_ms (--interval): is interval_sec in other words: give one of them"},
      {with({{"interval_sec", 601}}),
       "spec.interval_sec (--interval): 601 s: must be within 100ms-10m (interval_sec is deprecated: write "
       "\"interval\": \"601s\")"},
      {with({{"health_max_latency_ms", 0}}),
       "spec.health_max_latency_ms (--health-max-latency): 0 ms: must be within 1ms-60s (health_max_latency_ms is "
       "deprecated: write \"health_max_latency\": \"0s\")"},
      {with({{"interval_sec", 1.5}}), "spec.interval_sec (--interval): "},
  };
  for (const auto& [spec, words] : refused) {
    SCOPED_TRACE(spec.dump());
    auto r = experiment_from_json(spec, "");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message.rfind(words, 0), 0u) << r.error().message;
    auto cp = faultcp(spec);
    ASSERT_TRUE(cp.has_value());
    EXPECT_EQ(cp->rfind(words, 0), 0u) << *cp;
  }

  // to_json writes the flags' words, exactly (no rounding of 1500ms to 1.5s).
  auto a =
      args_of(parse_packet_args({"partition", "--target", "10.0.0.2", "--duration", "30s", "--health-url",
                                 "http://127.0.0.1:9/", "--interval", "1500ms", "--health-max-latency", "1500us"}));
  ASSERT_TRUE(a.ok()) << a.error().message;
  nlohmann::json spec;
  ASSERT_TRUE(add_experiment_guardrails(a->flags.guardrails, a->flags.record, spec).ok());
  EXPECT_EQ(spec["interval"], "1500ms");
  EXPECT_EQ(spec["health_max_latency"], "1500us");
  EXPECT_FALSE(spec.contains("interval_sec") || spec.contains("interval_ms") || spec.contains("health_max_latency_ms"));
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
    // The family's rows, and the shared guardrail rows every run takes.
    std::vector<const ExperimentField*> rows;
    for (const auto& f : table) rows.push_back(&f);
    for (const auto& f : guardrail_fields()) rows.push_back(&f);
    for (const ExperimentField* row : rows) {
      const ExperimentField& f = *row;
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
