// The catalogue: each template's render to the typed experiment (read back by
// experiment_from_json()), `faultctl catalogue render` against golden files
// (JSON and Chaos Mesh), bad parameters refused with exit 2 naming the
// parameter and its range, and Debian's python3-jsonschema agreeing with the
// tree's checks on a table of parameters, valid and invalid rows alike.
#include "userspace/orchestration/catalogue.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "enforce_env.h"

namespace florch {
namespace {

using faultline::catalogue;
using faultline::CatalogueTemplate;
using faultline::find_template;
using nlohmann::json;

const std::string kGoldenDir = std::string(ORCHESTRATION_DIR) + "/golden";

// The command lines the goldens hold, one per template and format.
struct GoldenCase {
  const char* file;
  std::vector<std::string> args;  // after "faultctl catalogue render"
};
std::vector<GoldenCase> golden_cases() {
  const std::vector<std::string> cg = {"--cgroup", "/system.slice/checkout.service", "--service", "checkout", "--run",
                                       "r42"};
  const std::vector<std::string> cm = {"--service", "checkout", "--run", "r42", "--format", "chaos-mesh"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<std::string> delay = {"upstream_delay", "--param", "target=10.0.0.7:5432", "--param",
                                          "latency_ms=200", "--param", "duration_s=60"};
  const std::vector<std::string> partition = {"upstream_partition", "--param", "target=10.0.0.7:5432", "--param",
                                              "duration_s=45"};
  const std::vector<std::string> cpu = {"cpu_stress_one", "--param", "load=50", "--param", "duration_s=30"};
  const std::vector<std::string> kill = {"process_kill_one", "--param", "duration_s=90"};
  return {
      {"upstream_delay.json", with(delay, cg)},
      {"upstream_delay.chaos-mesh.yaml", with(delay, cm)},
      {"upstream_partition.json", with(partition, cg)},
      {"upstream_partition.chaos-mesh.yaml", with(partition, cm)},
      {"upstream_http_error.json", with({"upstream_http_error", "--param", "target=10.0.0.8:8080", "--param",
                                         "status=503", "--param", "percent=25", "--param", "duration_s=120"},
                                        cg)},
      {"llm_provider_overloaded.json",
       with({"llm_provider_overloaded", "--param", "target=10.0.0.9:443", "--param", "provider=anthropic", "--param",
             "percent=10", "--param", "terminate_tls=true", "--param", "duration_s=60"},
            cg)},
      {"cpu_stress_one.json", with(cpu, cg)},
      {"cpu_stress_one.chaos-mesh.yaml", with(cpu, cm)},
      {"process_kill_one.json", with(kill, cg)},
      {"process_kill_one.chaos-mesh.yaml", with(kill, cm)},
  };
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fltest::CommandResult catalogue_cmd(std::vector<std::string> args) {
  args.insert(args.begin(), {flenf::kFaultctl, "catalogue"});
  return flenf::run(args, 30s);
}

// FAULTLINE_UPDATE_GOLDEN=1 rewrites the goldens from the binary (review the diff).
TEST(Catalogue, RenderMatchesGoldens) {
  const bool update = std::getenv("FAULTLINE_UPDATE_GOLDEN") != nullptr;
  for (const auto& c : golden_cases()) {
    std::vector<std::string> args = {"render"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = catalogue_cmd(args);
    ASSERT_TRUE(r.status.is(0)) << c.file << "\n" << r.describe();
    const std::string path = kGoldenDir + "/" + c.file;
    if (update) {
      std::ofstream(path) << r.out;
      continue;
    }
    EXPECT_EQ(r.out, read_file(path)) << "faultctl catalogue render differs from " << path;
  }
}

TEST(Catalogue, GoldensCarryTheTemplatesSha256) {
  for (const auto& t : catalogue()) {
    auto j = json::parse(read_file(kGoldenDir + "/" + t.name + ".json"));
    EXPECT_EQ(j["template_sha256"], t.sha256()) << t.name;
    EXPECT_EQ(j["version"], t.version) << t.name;
    EXPECT_EQ(t.sha256().size(), 64u);
  }
  // A different definition is a different hash.
  CatalogueTemplate changed = *find_template("upstream_delay");
  changed.params[1].max = 501;
  EXPECT_NE(changed.sha256(), find_template("upstream_delay")->sha256());
  EXPECT_NE(read_file(kGoldenDir + "/upstream_delay.chaos-mesh.yaml").find(find_template("upstream_delay")->sha256()),
            std::string::npos);
}

TEST(Catalogue, RendersTheTypedExperiment) {
  const faultline::TemplateInstance inst{"/fl-catalogue-test"};
  auto delay = faultline::render_template(*find_template("upstream_delay"),
                                          {{"target", "10.0.0.7:5432"}, {"latency_ms", 200}, {"duration_s", 60}}, inst);
  ASSERT_TRUE(delay) << delay.error().message;
  const auto* tcp = std::get_if<faultline::TcpFaultSpec>(&delay->experiment.fault);
  ASSERT_NE(tcp, nullptr) << delay->spec.dump();
  EXPECT_EQ(tcp->duration_ns, 60'000'000'000ULL);
  EXPECT_EQ(tcp->cgroup, "/fl-catalogue-test");
  EXPECT_EQ(delay->spec["toxic"], json::array({"latency=200ms"}));

  auto cpu = faultline::render_template(*find_template("cpu_stress_one"), {{"load", 80}, {"duration_s", 30.0}}, inst);
  ASSERT_TRUE(cpu) << cpu.error().message;
  const auto* rs = std::get_if<faultline::ResourceSpec>(&cpu->experiment.fault);
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->kind, faultline::ResourceKind::Cpu);
  EXPECT_EQ(rs->cores, 1u);
  EXPECT_DOUBLE_EQ(rs->load, 80);

  auto kill = faultline::render_template(*find_template("process_kill_one"), {{"duration_s", 30}}, inst);
  ASSERT_TRUE(kill) << kill.error().message;
  const auto* ks = std::get_if<faultline::ResourceSpec>(&kill->experiment.fault);
  ASSERT_NE(ks, nullptr);
  EXPECT_EQ(ks->action, faultline::ProcessAction::Kill);
  EXPECT_EQ(ks->signal, SIGKILL);

  for (const char* name : {"upstream_http_error", "llm_provider_overloaded"}) {
    json p = {{"target", "10.0.0.8:8080"}, {"percent", 5}, {"duration_s", 30}};
    if (std::string(name) == "upstream_http_error")
      p["status"] = 429;
    else
      p["provider"] = "openai";
    auto r = faultline::render_template(*find_template(name), p, inst);
    ASSERT_TRUE(r) << name << ": " << r.error().message;
    EXPECT_EQ(r->spec["kind"], "http") << name;
  }

  // No instance: refused, as is a rendered experiment that does not hold.
  auto none = faultline::render_template(*find_template("cpu_stress_one"), {{"load", 50}, {"duration_s", 30}}, {});
  ASSERT_FALSE(none);
  EXPECT_TRUE(none.error().bad_input);
  EXPECT_NE(none.error().message.find("cgroup"), std::string::npos) << none.error().message;
}

TEST(Catalogue, BadParametersExitTwoNamingTheParameterAndItsRange) {
  struct Row {
    std::vector<std::string> args;
    std::string said;
  };
  const std::vector<std::string> cg = {"--cgroup", "/x"};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.begin(), "render");
    a.insert(a.end(), cg.begin(), cg.end());
    return a;
  };
  const std::vector<Row> rows = {
      {with({"upstream_delay", "--param", "target=10.0.0.7:5432", "--param", "latency_ms=900", "--param",
             "duration_s=60"}),
       "latency_ms: 900 is out of range 20-500"},
      {with({"upstream_delay", "--param", "target=10.0.0.7:5432", "--param", "latency_ms=200", "--param",
             "duration_s=10"}),
       "duration_s: 10 is out of range 30-120"},
      {with({"upstream_delay", "--param", "target=10.0.0.7:5432", "--param", "duration_s=60"}),
       "latency_ms: is required (20-500)"},
      {with({"upstream_delay", "--param", "target=db.internal:5432", "--param", "latency_ms=200", "--param",
             "duration_s=60"}),
       "target: \"db.internal:5432\" is not ADDRESS:PORT"},
      {with({"upstream_delay", "--param", "target=10.0.0.7:5432", "--param", "latency_ms=fast", "--param",
             "duration_s=60"}),
       "latency_ms: \"fast\" is not a whole number: 20-500"},
      {with({"upstream_delay", "--param", "target=10.0.0.7:5432", "--param", "latency_ms=200", "--param",
             "duration_s=60", "--param", "jitter_ms=5"}),
       "jitter_ms: not a parameter of upstream_delay (target, latency_ms and duration_s)"},
      {with({"upstream_http_error", "--param", "target=10.0.0.7:80", "--param", "status=418", "--param", "percent=5",
             "--param", "duration_s=60"}),
       "status: 418 is not one of 429, 500, 502, 503 or 504"},
      {with({"upstream_http_error", "--param", "target=10.0.0.7:80", "--param", "status=500", "--param", "percent=60",
             "--param", "duration_s=60"}),
       "percent: 60 is out of range 5-50"},
      {with({"llm_provider_overloaded", "--param", "target=10.0.0.7:80", "--param", "provider=mistral", "--param",
             "percent=5", "--param", "duration_s=60"}),
       "provider: \"mistral\" is not one of anthropic or openai"},
      {with({"cpu_stress_one", "--param", "load=90", "--param", "duration_s=60"}), "load: 90 is out of range 20-80"},
      {with({"no_such_template", "--param", "load=50"}), "'no_such_template' is not a template: one of"},
      {{"render", "cpu_stress_one", "--param", "load=50", "--param", "duration_s=60"}, "--cgroup PATH is required"},
      {{"render", "upstream_http_error", "--param", "target=10.0.0.7:80", "--param", "status=500", "--param",
        "percent=5", "--param", "duration_s=60", "--service", "api", "--format", "chaos-mesh"},
       "upstream_http_error has no Chaos Mesh form"},
      {{"render", "cpu_stress_one", "--param", "load=50", "--param", "duration_s=60", "--service", "api", "--run",
        "-bad-", "--format", "chaos-mesh"},
       "run: '-bad-' cannot be the label chaos-agent/run's value"},
      {{"render", "cpu_stress_one", "--param", "load", "--cgroup", "/x"}, "--param 'load': expected NAME=VALUE"},
      {{"render", "cpu_stress_one", "--format", "yaml", "--cgroup", "/x"}, "--format 'yaml': expected json or"},
      {{"explode"}, "'explode': expected list, show or render"},
  };
  for (const auto& row : rows) {
    auto r = catalogue_cmd(row.args);
    EXPECT_TRUE(r.status.is(2)) << row.said << "\n" << r.describe();
    EXPECT_NE(r.err.find(row.said), std::string::npos) << "expected: " << row.said << "\n" << r.describe();
    EXPECT_EQ(r.out, "") << "nothing is printed on bad input\n" << r.describe();
  }
}

TEST(Catalogue, ListAndShow) {
  auto list = catalogue_cmd({"list", "--json"});
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  auto j = json::parse(list.out);
  ASSERT_EQ(j["templates"].size(), 6u);
  for (const auto& t : j["templates"]) {
    EXPECT_EQ(t["schema"]["additionalProperties"], false) << t.dump();
    EXPECT_EQ(t["mode"], "one");
    EXPECT_EQ(t["max_duration_s"], 120);
    EXPECT_FALSE(t["facts"].empty());
  }
  auto show = catalogue_cmd({"show", "upstream_delay"});
  ASSERT_TRUE(show.status.is(0)) << show.describe();
  auto d = json::parse(show.out);
  EXPECT_EQ(d["sha256"], find_template("upstream_delay")->sha256());
  EXPECT_EQ(d["schema"]["properties"]["latency_ms"]["minimum"], 20);
  EXPECT_EQ(d["schema"]["properties"]["latency_ms"]["maximum"], 500);
  auto text = catalogue_cmd({"list"});
  ASSERT_TRUE(text.status.is(0)) << text.describe();
  EXPECT_NE(text.out.find("latency_ms: 20-500"), std::string::npos) << text.out;
}

// Debian's python3-jsonschema (not one pip put in /usr/local) judges every row
// against the template's schema; the tree's check_params() must say the same.
TEST(Catalogue, JsonSchemaAgreesOnTheParameterTable) {
  struct Row {
    const char* tmpl;
    json params;
    bool valid;
  };
  const json target = "10.0.0.7:5432";
  const std::vector<Row> rows = {
      {"upstream_delay", {{"target", target}, {"latency_ms", 20}, {"duration_s", 30}}, true},
      {"upstream_delay", {{"target", target}, {"latency_ms", 500}, {"duration_s", 120}}, true},
      {"upstream_delay", {{"target", target}, {"latency_ms", 200.0}, {"duration_s", 60}}, true},
      {"upstream_delay", {{"target", "[fd00::7]:443"}, {"latency_ms", 20}, {"duration_s", 30}}, true},
      {"upstream_delay", {{"target", "255.255.255.255:65535"}, {"latency_ms", 20}, {"duration_s", 30}}, true},
      {"upstream_delay", {{"target", target}, {"latency_ms", 19}, {"duration_s", 30}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", 501}, {"duration_s", 30}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", 200.5}, {"duration_s", 30}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", "200"}, {"duration_s", 30}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", true}, {"duration_s", 30}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", 200}, {"duration_s", 121}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", 200}}, false},
      {"upstream_delay", {{"target", target}, {"latency_ms", 200}, {"duration_s", 60}, {"jitter_ms", 1}}, false},
      {"upstream_delay", {{"target", "10.0.0.7"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", "256.0.0.7:80"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", "10.0.0.7:65536"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", "10.0.0.7:0"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", "10.0.0.7:80\n"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", "x10.0.0.7:80"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", "db.internal:5432"}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", {{"target", 5432}, {"latency_ms", 200}, {"duration_s", 60}}, false},
      {"upstream_delay", json::array(), false},
      {"upstream_partition", {{"target", target}, {"duration_s", 30}}, true},
      {"upstream_partition", {{"target", target}, {"duration_s", 29}}, false},
      {"upstream_http_error", {{"target", target}, {"status", 429}, {"percent", 5}, {"duration_s", 30}}, true},
      {"upstream_http_error",
       {{"target", target}, {"status", 504}, {"percent", 50}, {"duration_s", 30}, {"terminate_tls", true}},
       true},
      {"upstream_http_error", {{"target", target}, {"status", 503.0}, {"percent", 5}, {"duration_s", 30}}, true},
      {"upstream_http_error", {{"target", target}, {"status", 501}, {"percent", 5}, {"duration_s", 30}}, false},
      {"upstream_http_error", {{"target", target}, {"status", "503"}, {"percent", 5}, {"duration_s", 30}}, false},
      {"upstream_http_error", {{"target", target}, {"status", 503}, {"percent", 4}, {"duration_s", 30}}, false},
      {"upstream_http_error", {{"target", target}, {"status", 503}, {"percent", 51}, {"duration_s", 30}}, false},
      {"upstream_http_error",
       {{"target", target}, {"status", 503}, {"percent", 5}, {"duration_s", 30}, {"terminate_tls", "yes"}},
       false},
      {"llm_provider_overloaded",
       {{"target", target}, {"provider", "openai"}, {"percent", 5}, {"duration_s", 30}},
       true},
      {"llm_provider_overloaded",
       {{"target", target}, {"provider", "Anthropic"}, {"percent", 5}, {"duration_s", 30}},
       false},
      {"llm_provider_overloaded", {{"target", target}, {"percent", 5}, {"duration_s", 30}}, false},
      {"cpu_stress_one", {{"load", 20}, {"duration_s", 30}}, true},
      {"cpu_stress_one", {{"load", 80}, {"duration_s", 120}}, true},
      {"cpu_stress_one", {{"load", 81}, {"duration_s", 30}}, false},
      {"cpu_stress_one", {{"load", 50}, {"duration_s", 30}, {"cores", 2}}, false},
      {"cpu_stress_one", {{"load", nullptr}, {"duration_s", 30}}, false},
      {"process_kill_one", {{"duration_s", 30}}, true},
      {"process_kill_one", {{"duration_s", 30}, {"signal", "SIGTERM"}}, false},
      {"process_kill_one", json::object(), false},
  };
  json cases = json::array();
  for (const auto& row : rows)
    cases.push_back({{"schema", find_template(row.tmpl)->schema()}, {"instance", row.params}});
  const std::string dir = flenf::unique_name("schema");
  const std::string input = "/tmp/" + dir + ".json";
  std::ofstream(input) << cases.dump();
  // Debian's package only: the paths of /usr/local (pip) are dropped.
  const std::string script =
      "import json, sys\n"
      "sys.path = [p for p in sys.path if not p.startswith('/usr/local')]\n"
      "import jsonschema\n"
      "assert jsonschema.__file__.startswith('/usr/lib/python3/dist-packages/'), jsonschema.__file__\n"
      "out = []\n"
      "for c in json.load(open(sys.argv[1])):\n"
      "    jsonschema.Draft202012Validator.check_schema(c['schema'])\n"
      "    out.append(jsonschema.Draft202012Validator(c['schema']).is_valid(c['instance']))\n"
      "print(json.dumps(out))\n";
  auto r = flenf::run({flenf::kPython, "-c", script, input}, 60s);
  std::filesystem::remove(input);
  ASSERT_TRUE(r.status.is(0)) << "python3-jsonschema (Debian) is needed: scripts/install-deps.sh\n" << r.describe();
  auto verdicts = json::parse(r.out);
  ASSERT_EQ(verdicts.size(), rows.size()) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto* t = find_template(rows[i].tmpl);
    const auto err = faultline::check_params(*t, rows[i].params);
    EXPECT_EQ(verdicts[i].get<bool>(), rows[i].valid)
        << "row " << i << " " << rows[i].tmpl << " " << rows[i].params.dump() << ": jsonschema";
    EXPECT_EQ(!err.has_value(), rows[i].valid) << "row " << i << " " << rows[i].tmpl << " " << rows[i].params.dump()
                                               << ": the tree says " << (err ? err->text() : "valid");
  }
}

}  // namespace
}  // namespace florch
