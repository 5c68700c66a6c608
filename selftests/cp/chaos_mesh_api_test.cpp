// Chaos Mesh documents through faultcp (POST /v1/chaos-mesh) on both
// backends: three enrolled agents with labels, two registered services with
// their instances {agent, cgroup} and endpoints; NetworkChaos selectors pick
// service instances (each faulted only in its cgroup, on its agent) and
// target.selector the peers; PhysicalMachineChaos selectors pick agents;
// every mode's draw is recorded in the answer and the audit; what no
// Kubernetes API can answer is refused with its sentence, nothing stored.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "cp_client.h"
#include "selftests/lib/child_process.h"

namespace {

using fltest::Backend;
using fltest::CpReply;
using nlohmann::json;

class ChaosMeshCp : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    server_ = std::make_unique<fltest::CpServer>(GetParam(), fltest::test_config());
    auto signup = call("POST", "/v1/auth/signup",
                       R"({"email":"chaos@example.com","password":"correct horse battery","workspace":"cm"})", "");
    ASSERT_EQ(signup.status, 201) << signup.describe();
    token_ = signup.json()["token"];
    const std::vector<std::pair<std::string, json>> hosts = {
        {"host-a", {{"zone", "a"}}}, {"host-b", {{"zone", "b"}}}, {"host-c", {{"zone", "a"}, {"tier", "db"}}}};
    for (const auto& [name, labels] : hosts) {
      const std::string enroll = call("POST", "/v1/tokens", R"({"kind":"enrollment"})").json()["token"];
      auto reg =
          server_->call("POST", "/v1/agents/register", enroll, json{{"hostname", name}, {"labels", labels}}.dump());
      ASSERT_EQ(reg.status, 201) << reg.describe();
      agents_[name] = {reg.json()["agent_id"].get<int64_t>(), reg.json()["token"].get<std::string>()};
    }
    service("web", {{"app", "web"}, {"namespace", "shop"}},
            {{"host-a", "/fl-cm-test/web-a"}, {"host-b", "/fl-cm-test/web-b"}}, {"127.0.0.1:8080"});
    service("db", {{"app", "db"}, {"namespace", "data"}}, {{"host-c", "/fl-cm-test/db-c"}},
            {"127.0.0.2:5432", "127.0.0.3:5432"});
  }
  CpReply call(const std::string& method, const std::string& path, const std::string& body = "",
               const std::string& token = "-") {
    return server_->call(method, path, token == "-" ? token_ : token, body);
  }
  void service(const std::string& name, const json& labels,
               const std::vector<std::pair<std::string, std::string>>& instances,
               const std::vector<std::string>& endpoints) {
    json inst = json::array();
    for (const auto& [host, cgroup] : instances) inst.push_back({{"agent", agents_[host].first}, {"cgroup", cgroup}});
    auto r = call("POST", "/v1/services",
                  json{{"name", name}, {"labels", labels}, {"instances", inst}, {"endpoints", endpoints}}.dump());
    ASSERT_EQ(r.status, 201) << r.describe();
  }
  CpReply apply(const std::string& yaml) {
    return server_->call("POST", "/v1/chaos-mesh", token_, json{{"document", yaml}}.dump());
  }
  static std::string network(const std::string& selector_and_mode, const std::string& peers) {
    return "apiVersion: chaos-mesh.org/v1alpha1\nkind: NetworkChaos\nmetadata: {name: cm-test}\nspec:\n"
           "  action: delay\n  delay: {latency: 20ms}\n  duration: 30s\n" +
           selector_and_mode + peers;
  }
  static std::string machine(const std::string& selection) {
    return "apiVersion: chaos-mesh.org/v1alpha1\nkind: PhysicalMachineChaos\nmetadata: {name: cm-machine}\n"
           "spec:\n  action: network-delay\n  network-delay: {device: lo, ip-address: 127.0.0.9, latency: 10ms}\n"
           "  duration: 30s\n" +
           selection;
  }
  std::string host_of(int64_t agent) {
    for (const auto& [name, a] : agents_)
      if (a.first == agent) return name;
    return "";
  }
  // The experiments' hosts and cgroups, "host-a /fl-cm-test/web-a" (or "host-b host-wide").
  std::multiset<std::string> placed(const CpReply& r) {
    std::multiset<std::string> out;
    const json j = r.json();
    for (const auto& e : j["experiments"])
      out.insert(host_of(e["agent_id"]) + " " + e["spec"].value("cgroup", std::string("host-wide")));
    return out;
  }

  std::unique_ptr<fltest::CpServer> server_;
  std::string token_;
  std::map<std::string, std::pair<int64_t, std::string>> agents_;  // hostname -> id, agent token
};

TEST_P(ChaosMeshCp, ModeOneDrawsOneMatchingInstanceAndOnlyItsAgentGetsTheFault) {
  const std::string peers = "  target:\n    mode: all\n    selector: {labelSelectors: {app: db}}\n";
  auto r = apply(network("  mode: one\n  selector:\n    labelSelectors: {app: web}\n", peers));
  ASSERT_EQ(r.status, 201) << r.describe();
  const json j = r.json();
  ASSERT_EQ(j["experiments"].size(), 1u) << j.dump();
  const json e = j["experiments"][0];
  const std::string host = host_of(e["agent_id"]);
  ASSERT_TRUE(host == "host-a" || host == "host-b") << j.dump();
  EXPECT_EQ(e["spec"]["cgroup"], host == "host-a" ? "/fl-cm-test/web-a" : "/fl-cm-test/web-b");
  EXPECT_EQ(e["spec"]["kind"], "latency");
  EXPECT_EQ(e["spec"]["target"], json({"127.0.0.2", "127.0.0.3"})) << "the db service's endpoints are the peers";
  EXPECT_EQ(e["spec"]["port"], "5432");
  // The draw: two instances matched, one picked, the one the experiment is on.
  EXPECT_EQ(j["draw"]["mode"], "one");
  EXPECT_EQ(j["draw"]["matched"], 2);
  EXPECT_EQ(j["draw"]["picked"], 1);
  EXPECT_EQ(j["draw"]["matches"].size(), 2u);
  EXPECT_EQ(j["draw"]["drawn"][0]["agent"], e["agent_id"]);
  EXPECT_EQ(j["draw"]["drawn"][0]["cgroup"], e["spec"]["cgroup"]);
  EXPECT_EQ(j["draw"]["target"]["endpoints"].size(), 2u);

  // The drawn agent is handed the fault; the other matching one gets nothing.
  const std::string other = host == "host-a" ? "host-b" : "host-a";
  auto mine = server_->call("GET", "/v1/agents/" + std::to_string(agents_[host].first) + "/next?wait_ms=0",
                            agents_[host].second);
  ASSERT_EQ(mine.status, 200) << mine.describe();
  EXPECT_EQ(mine.json()["experiment"]["id"], e["id"]) << mine.describe();
  EXPECT_EQ(mine.json()["experiment"]["spec"]["cgroup"], e["spec"]["cgroup"]);
  auto theirs = server_->call("GET", "/v1/agents/" + std::to_string(agents_[other].first) + "/next?wait_ms=0",
                              agents_[other].second);
  EXPECT_TRUE(theirs.json()["experiment"].is_null()) << theirs.describe();

  // The audit records the draw, as the experiment's own entry does.
  const json audit = call("GET", "/v1/audit/export").json();
  bool apply_seen = false, create_seen = false;
  for (const auto& entry : audit["entries"]) {
    const json detail =
        entry["detail"].is_string() ? json::parse(entry["detail"].get<std::string>(), nullptr, false) : entry["detail"];
    if (entry["action"] == "chaos_mesh.apply") {
      apply_seen = true;
      EXPECT_EQ(entry["object"], "chaos-mesh:cm-test");
      EXPECT_EQ(detail["draw"]["drawn"], j["draw"]["drawn"]) << detail.dump();
      EXPECT_EQ(detail["selector"]["labelSelectors"]["app"], "web");
    } else if (entry["action"] == "experiment.create") {
      create_seen = true;
      EXPECT_EQ(detail["drawn"]["agent"], e["agent_id"]) << detail.dump();
      EXPECT_EQ(detail["chaos_mesh"]["name"], "cm-test");
    }
  }
  EXPECT_TRUE(apply_seen && create_seen) << audit.dump();
}

TEST_P(ChaosMeshCp, EverySelectorAndModeOverTheRegisteredServices) {
  const std::string peers = "  externalTargets: ['192.0.2.10']\n";
  const std::string web_and_db =
      "  selector:\n    expressionSelectors: [{key: app, operator: In, values: [web, db]}]\n";
  const std::multiset<std::string> all3 = {"host-a /fl-cm-test/web-a", "host-b /fl-cm-test/web-b",
                                           "host-c /fl-cm-test/db-c"};
  auto every = apply(network("  mode: all\n" + web_and_db, peers));
  ASSERT_EQ(every.status, 201) << every.describe();
  EXPECT_EQ(placed(every), all3);
  EXPECT_EQ(every.json()["experiments"][0]["spec"]["target"], "192.0.2.10");

  const std::vector<std::pair<std::string, size_t>> counts = {{"  mode: fixed\n  value: '2'\n", 2},
                                                              {"  mode: fixed\n  value: '9'\n", 3},
                                                              {"  mode: fixed-percent\n  value: '67'\n", 2},
                                                              {"  mode: fixed-percent\n  value: '100'\n", 3}};
  for (const auto& [mode, n] : counts) {
    auto r = apply(network(mode + web_and_db, peers));
    ASSERT_EQ(r.status, 201) << mode << r.describe();
    EXPECT_EQ(r.json()["experiments"].size(), n) << mode;
    EXPECT_EQ(r.json()["draw"]["picked"], n) << mode;
    for (const auto& p : placed(r)) EXPECT_TRUE(all3.contains(p)) << p;
  }
  // random-max-percent: a percent drawn in 0..value, then floor(3 * percent / 100) of them.
  for (int i = 0; i < 5; ++i) {
    auto r = apply(network("  mode: random-max-percent\n  value: '100'\n" + web_and_db, peers));
    if (r.status == 409) {
      EXPECT_NE(r.body.find("drew none of the 3 matches"), std::string::npos) << r.describe();
      continue;
    }
    ASSERT_EQ(r.status, 201) << r.describe();
    const int64_t percent = r.json()["draw"]["percent_drawn"];
    EXPECT_EQ(static_cast<int64_t>(r.json()["experiments"].size()), 3 * percent / 100) << r.describe();
  }

  const std::vector<std::pair<std::string, std::multiset<std::string>>> picks = {
      {"  selector: {namespaces: [data]}\n", {"host-c /fl-cm-test/db-c"}},
      {"  selector:\n    namespaces: [shop]\n    nodes: [host-b]\n", {"host-b /fl-cm-test/web-b"}},
      {"  selector:\n    labelSelectors: {app: web}\n    nodeSelectors: {zone: a}\n", {"host-a /fl-cm-test/web-a"}},
      {"  selector:\n    expressionSelectors: [{key: app, operator: NotIn, values: [web]}]\n",
       {"host-c /fl-cm-test/db-c"}},
      {"  selector:\n    expressionSelectors: [{key: namespace, operator: Exists}, {key: tier, operator: "
       "DoesNotExist}]\n",
       all3},
  };
  for (const auto& [selector, want] : picks) {
    auto r = apply(network(selector, peers));
    ASSERT_EQ(r.status, 201) << selector << r.describe();
    EXPECT_EQ(placed(r), want) << selector;
  }
}

TEST_P(ChaosMeshCp, PhysicalMachineChaosPicksAgentsHostWide) {
  const std::vector<std::pair<std::string, std::multiset<std::string>>> picks = {
      {"  selector: {labelSelectors: {zone: a}}\n", {"host-a host-wide", "host-c host-wide"}},
      {"  selector:\n    physicalMachines: {default: [host-b]}\n", {"host-b host-wide"}},
      {"  selector:\n    expressionSelectors: [{key: tier, operator: In, values: [db]}]\n", {"host-c host-wide"}},
      {"  address: ['http://host-c:31767']\n", {"host-c host-wide"}},
      {"  mode: fixed\n  value: '1'\n  selector: {labelSelectors: {zone: a}}\n", {}},
  };
  for (const auto& [selection, want] : picks) {
    auto r = apply(machine(selection));
    ASSERT_EQ(r.status, 201) << selection << r.describe();
    if (want.empty()) {
      ASSERT_EQ(r.json()["experiments"].size(), 1u);
      const std::string got = *placed(r).begin();
      EXPECT_TRUE(got == "host-a host-wide" || got == "host-c host-wide") << got;
      continue;
    }
    EXPECT_EQ(placed(r), want) << selection;
    EXPECT_EQ(r.json()["experiments"][0]["spec"]["kind"], "latency");
    EXPECT_EQ(r.json()["experiments"][0]["spec"]["dev"], "lo");
  }
}

TEST_P(ChaosMeshCp, WhatNoKubernetesApiAnswersIsRefusedEachWithItsSentence) {
  const std::string peers = "  externalTargets: ['192.0.2.10']\n";
  const std::string k8s = "no Kubernetes API is read: faultcp selects registered services";
  struct Row {
    std::string doc;
    int status;
    std::string says;
  };
  const std::vector<Row> rows = {
      {network("  selector:\n    pods: {shop: [web-0]}\n    labelSelectors: {app: web}\n", peers), 400,
       "spec.selector.pods: " + k8s},
      {network("  selector:\n    fieldSelectors: {spec.nodeName: n1}\n    labelSelectors: {app: web}\n", peers), 400,
       "spec.selector.fieldSelectors: " + k8s},
      {network("  selector:\n    annotationSelectors: {a: b}\n    labelSelectors: {app: web}\n", peers), 400,
       "spec.selector.annotationSelectors: " + k8s},
      {network("  selector:\n    podPhaseSelectors: [Running]\n    labelSelectors: {app: web}\n", peers), 400,
       "spec.selector.podPhaseSelectors: " + k8s},
      {network("  selector:\n    nodes: [host-a]\n", peers), 400,
       "spec.selector: nodes and nodeSelectors alone: a node is not a workload"},
      {network("  selector:\n    nodeSelectors: {zone: a}\n", peers), 400,
       "spec.selector: nodes and nodeSelectors alone: a node is not a workload"},
      {network("", peers), 400, "spec.selector: missing: faultcp faults the instances of the services"},
      {network("  selector: {labelSelectors: {app: nothing}}\n", peers), 404,
       "spec.selector: no instance of a registered service matches (2 services looked at)"},
      {network("  mode: some\n  selector: {labelSelectors: {app: web}}\n", peers), 400,
       "spec.mode: 'some': expected one, all, fixed, fixed-percent or random-max-percent"},
      {network("  mode: fixed-percent\n  selector: {labelSelectors: {app: web}}\n", peers), 400,
       "spec.value: missing: mode fixed-percent takes a percent, 1-100"},
      {network("  selector:\n    expressionSelectors: [{key: app, operator: Like, values: [w]}]\n", peers), 400,
       "spec.selector.expressionSelectors[0].operator: 'Like': expected In, NotIn, Exists or DoesNotExist"},
      {network("  selector: {labelSelectors: {app: web}}\n", "  target:\n    selector: {labelSelectors: {app: x}}\n"),
       404, "spec.target.selector: no registered service with endpoints matches"},
      {machine("  selector: {namespaces: [default]}\n"), 400, "spec.selector.namespaces: an agent has no namespace"},
      {machine(""), 400, "spec.selector: missing: the agents to fault"},
      {machine("  selector: {labelSelectors: {zone: z}}\n"), 404, "spec.selector: no agent of the workspace matches"},
  };
  for (const auto& row : rows) {
    auto r = apply(row.doc);
    EXPECT_EQ(r.status, row.status) << row.doc << r.describe();
    EXPECT_NE(r.json().value("error", "").find(row.says), std::string::npos) << row.says << "\n" << r.describe();
  }
  auto list = call("GET", "/v1/experiments").json();
  EXPECT_TRUE(list["experiments"].empty()) << "nothing refused was stored: " << list.dump();
}

// faultctl apply -f FILE --control-plane URL: the file goes to faultcp, which
// draws; a refusal is exit 2 with faultcp's sentence.
TEST_P(ChaosMeshCp, FaultctlApplySendsTheFileToTheControlPlane) {
  const std::string path = "/tmp/fl-cm-cp-" + std::to_string(::getpid()) + ".yaml";
  const std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  std::ofstream(path) << network("  mode: one\n  selector: {labelSelectors: {app: web}}\n",
                                 "  externalTargets: ['192.0.2.10']\n");
  auto r = fltest::run_command({FAULTCTL_PATH, "apply", "-f", path, "--control-plane", url, "--token", token_});
  EXPECT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("mode one drew 1 of 2 matches\n"), std::string::npos) << r.out;
  const json list = call("GET", "/v1/experiments").json();
  ASSERT_EQ(list["experiments"].size(), 1u) << list.dump();
  const json e = list["experiments"][0];
  EXPECT_NE(r.out.find("experiment " + std::to_string(e["id"].get<int64_t>()) + " on agent " +
                       std::to_string(e["agent_id"].get<int64_t>()) + " in " + e["spec"]["cgroup"].get<std::string>()),
            std::string::npos)
      << r.out;
  std::ofstream(path) << network("  selector: {labelSelectors: {app: none}}\n", "  externalTargets: ['192.0.2.10']\n");
  auto none = fltest::run_command({FAULTCTL_PATH, "--control-plane", url, "--token", token_, "apply", "-f", path});
  ::unlink(path.c_str());
  EXPECT_TRUE(none.status.is(2)) << none.describe();
  EXPECT_NE(none.err.find("404: spec.selector: no instance of a registered service matches"), std::string::npos)
      << none.err;
}

INSTANTIATE_TEST_SUITE_P(Backends, ChaosMeshCp, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace
