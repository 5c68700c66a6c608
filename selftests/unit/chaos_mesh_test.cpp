// Chaos Mesh NetworkChaos documents, shaped like the examples of Chaos Mesh's
// documentation (written here, adapted to a host: no pod selector, external
// targets), read as the typed experiment they mean (the JSON the family
// readers take, read by experiment_from_json()); and what a host agent cannot
// honour, refused at its line and column with what to write instead.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "selftests/lib/child_process.h"
#include "userspace/ops/chaos_mesh_import.h"
#include "userspace/orchestration/catalogue.h"

namespace faultline {
namespace {

std::string errors_of(const ChaosMeshImport& r) {
  std::string s;
  for (const auto& e : r.errors) s += e.render("F") + "\n";
  return s;
}

constexpr const char* kHead = "apiVersion: chaos-mesh.org/v1alpha1\nkind: NetworkChaos\nmetadata:\n  name: ";

struct Translation {
  const char* name;
  std::string body;  // after metadata.name
  std::string spec;  // the experiment's JSON
};

TEST(ChaosMesh, DocumentationShapedExamplesBecomeTypedExperiments) {
  const std::vector<Translation> cases = {
      {"delay",
       "delay\nspec:\n  action: delay\n  mode: all\n  direction: to\n  externalTargets: ['10.0.5.10']\n"
       "  delay:\n    latency: '10ms'\n    correlation: '100'\n    jitter: '0ms'\n  duration: '30s'\n",
       R"({"delay_ms":10,"direction":"egress","duration_sec":30,"kind":"latency","target":"10.0.5.10"})"},
      {"delay with jitter",
       "delay-jitter\nspec:\n  action: delay\n  externalTargets: ['10.0.5.0/24']\n"
       "  delay:\n    latency: '90ms'\n    jitter: '10ms'\n  duration: '2m'\n",
       R"({"delay_ms":90,"duration_sec":120,"jitter_ms":10,"kind":"latency","target":"10.0.5.0/24"})"},
      {"loss",
       "loss\nspec:\n  action: loss\n  mode: all\n  externalTargets: ['192.0.2.10', 'localhost']\n"
       "  loss:\n    loss: '25'\n    correlation: '25'\n  direction: both\n  duration: '10s'\n",
       R"({"correlation":25,"direction":"both","duration_sec":10,"kind":"loss","percent":25,)"
       R"("target":["192.0.2.10","127.0.0.1"]})"},
      {"duplicate",
       "duplicate\nspec:\n  action: duplicate\n  externalTargets: ['198.51.100.7']\n"
       "  duplicate:\n    duplicate: '40'\n    correlation: '0'\n  duration: '30s'\n",
       R"({"duration_sec":30,"kind":"duplicate","percent":40,"target":"198.51.100.7"})"},
      {"corrupt",
       "corrupt\nspec:\n  action: corrupt\n  externalTargets: ['198.51.100.7']\n  direction: from\n"
       "  corrupt:\n    corrupt: '40'\n  duration: '30s'\n",
       R"({"direction":"ingress","duration_sec":30,"kind":"corrupt","percent":40,"target":"198.51.100.7"})"},
      {"partition",
       "partition\nspec:\n  action: partition\n  mode: all\n  selector: {}\n  direction: to\n"
       "  externalTargets: ['10.0.9.0/24']\n  duration: '1m'\n",
       R"({"direction":"egress","duration_sec":60,"kind":"partition","target":"10.0.9.0/24"})"},
      {"bandwidth",
       "bandwidth\nspec:\n  action: bandwidth\n  externalTargets: ['10.0.5.10']\n  device: eth0\n"
       "  bandwidth:\n    rate: '1mbps'\n    limit: 20971520\n    buffer: 10000\n  duration: '30s'\n",
       R"({"dev":"eth0","duration_sec":30,"kind":"bandwidth","rate_bps":8000000,"target":"10.0.5.10"})"},
  };
  for (const auto& c : cases) {
    ChaosMeshImport r = import_chaos_mesh(std::string(kHead) + c.body);
    EXPECT_TRUE(r.ok()) << c.name << ":\n" << errors_of(r);
    EXPECT_EQ(r.spec.dump(), c.spec) << c.name;
    EXPECT_TRUE(r.experiment.has_value()) << c.name;
  }
  ChaosMeshImport bw = import_chaos_mesh(std::string(kHead) + cases.back().body);
  ASSERT_EQ(bw.notes.size(), 2u);
  EXPECT_EQ(bw.notes[0],
            "spec.bandwidth.limit (a tc tbf queue size) has no equivalent in Faultline's pacing and is not used");
}

TEST(ChaosMesh, WhatAHostCannotHonourIsRefusedWhereItIsWritten) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"x\nspec:\n  action: delay\n  mode: one\n  selector:\n    namespaces: [default]\n    labelSelectors:\n"
       "      'app': 'web-show'\n  delay: {latency: '10ms'}\n  externalTargets: ['10.0.0.1']\n  duration: 30s\n",
       "F:9:5: spec.selector.namespaces: pod selectors cannot be honoured by a host agent: Faultline acts on this "
       "host's own traffic. Remove it, name the peers in spec.externalTargets, and to narrow the fault to one "
       "workload select it with labelSelectors {service: NAME} and mode one, and give faultctl apply --cgroup PATH\n"
       "F:11:7: spec.selector.labelSelectors.app: Faultline selects an instance by the label service alone "
       "({service: NAME}), whose cgroup --cgroup names\n"},
      {"x\nspec:\n  action: delay\n  mode: fixed-percent\n  value: '50'\n  delay: {latency: '10ms'}\n"
       "  externalTargets: ['10.0.0.1']\n  duration: 30s\n",
       "F:7:9: spec.mode: 'fixed-percent' picks pods: pod selectors cannot be honoured by a host agent; leave mode "
       "out (or all), or select one instance with labelSelectors {service: NAME}\n"
       "F:8:10: spec.value: how many pods mode picks: there are no pods on a host; leave it out\n"},
      {"x\nspec:\n  action: delay\n  mode: one\n  selector:\n    labelSelectors: {service: web}\n"
       "  delay: {latency: '10ms'}\n  externalTargets: ['10.0.0.1']\n  duration: 30s\n",
       "F:9:31: spec.selector.labelSelectors.service: 'web' selects pods, which a host agent cannot list: give the "
       "cgroup of the instance to fault (faultctl apply --cgroup PATH)\n"},
      {"x\nspec:\n  action: delay\n  delay: {latency: '10.5ms'}\n  externalTargets: ['10.0.0.1']\n"
       "  duration: 30s\n",
       "F:7:20: spec.delay.latency: '10.5ms': Faultline takes whole milliseconds\n"},
      // The family reader's caps, put at the Chaos Mesh field.
      {"x\nspec:\n  action: delay\n  delay: {latency: '10ms'}\n  externalTargets: ['10.0.0.1']\n"
       "  duration: 90m\n",
       "F:9:13: spec.duration: spec.duration_sec (--duration): 90m is over the cap of 1h\n"},
      {"x\nspec:\n  action: loss\n  target:\n    selector: {namespaces: [db]}\n    mode: all\n  loss: {loss: '5'}\n"
       "  duration: 30s\n",
       "F:6:3: spec.externalTargets: required here: the peers (addresses, CIDRs or host names) the fault hits; a "
       "host's whole traffic is not a target\n"
       "F:7:3: spec.target: a pod selector for the other side: write the peers' addresses (or names) in "
       "spec.externalTargets, or submit the file to faultcp (faultctl apply --control-plane URL), which reads "
       "target.selector\n"},
      {"x\nspec:\n  action: netem\n  externalTargets: ['10.0.0.1']\n  duration: 30s\n",
       "F:6:11: spec.action: 'netem': Faultline imports delay, loss, duplicate, corrupt, partition and bandwidth "
       "(netem: write one NetworkChaos per effect)\n"},
      {"x\nspec:\n  action: loss\n  externalTargets: ['10.0.0.1']\n  loss: {loss: '5'}\n",
       "F:6:3: spec.duration: required here: a Faultline fault always ends (at most 1h); Chaos Mesh's "
       "run-until-deleted has no equivalent without a controller\n"},
      {"x\nspec:\n  action: duplicate\n  externalTargets: ['10.0.0.1']\n  duplicate: {duplicate: '5', correlation: "
       "'25'}\n"
       "  duration: 30s\n",
       "F:8:44: spec.duplicate.correlation: '25': Faultline decides each packet independently for duplicate "
       "(correlation 0); correlated decisions are for loss\n"},
      {"x\nspec:\n  action: delay\n  externalTargets: ['10.0.0.1']\n  delay: {latency: 10ms, reorder: {reorder: '5'}}\n"
       "  direction: sideways\n  duration: 30s\n",
       "F:8:35: spec.delay.reorder: reordering is not a Faultline fault; leave it out\n"
       "F:9:14: spec.direction: 'sideways': expected to, from or both\n"},
      {"x\nspec:\n  action: loss\n  externalTargets: ['10.0.0.1']\n  loss: {loss: 'lots'}\n  scheduler: {cron: '@every "
       "1m'}\n"
       "  duration: 30s\n",
       "F:8:16: spec.loss.loss: 'lots': expected a percent, like \"25\"\n"
       "F:9:3: spec.scheduler: not a field Faultline reads from a NetworkChaos\n"},
  };
  for (const auto& [body, want] : cases) {
    ChaosMeshImport r = import_chaos_mesh(std::string(kHead) + body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(errors_of(r), want) << body;
  }
  EXPECT_EQ(errors_of(import_chaos_mesh("apiVersion: chaos-mesh.org/v1alpha1\nkind: IOChaos\nmetadata: {name: p}\n"
                                        "spec: {action: latency}\n")),
            "F:2:7: kind: expected NetworkChaos, StressChaos, PodChaos or PhysicalMachineChaos (other Chaos Mesh "
            "kinds: use faultctl run syscall|memory|disk)\n");
  EXPECT_EQ(errors_of(import_chaos_mesh("a: [\n")).substr(0, 20), "F:2:1: <document>: n");
}

constexpr const char* kMachineHead =
    "apiVersion: chaos-mesh.org/v1alpha1\nkind: PhysicalMachineChaos\nmetadata:\n  name: m\nspec:\n";

// PhysicalMachineChaos, chaosd's attacks, each action read from its own block.
TEST(ChaosMesh, PhysicalMachineChaosActionsBecomeTypedExperiments) {
  const std::vector<Translation> cases = {
      {"network-delay (the must-run example: device, ip-address, latency)",
       "  action: network-delay\n  address: ['172.16.112.130:31767']\n  network-delay:\n    device: eth0\n"
       "    ip-address: 10.0.5.10\n    latency: 100ms\n    jitter: 10ms\n  duration: '30s'\n",
       R"({"delay_ms":100,"dev":"eth0","duration_sec":30,"jitter_ms":10,"kind":"latency","target":"10.0.5.10"})"},
      {"network-loss on two addresses, one protocol and a port range",
       "  action: network-loss\n  network-loss:\n    ip-address: '192.0.2.10,192.0.2.0/28'\n    ip-protocol: tcp\n"
       "    egress-port: '8001:8010'\n    percent: '50'\n    correlation: '25'\n  duration: 10s\n",
       R"({"correlation":25,"duration_sec":10,"kind":"loss","percent":50,"port":"8001-8010","proto":"tcp",)"
       R"("target":["192.0.2.10","192.0.2.0/28"]})"},
      {"network-corrupt",
       "  action: network-corrupt\n  network-corrupt: {ip-address: 198.51.100.7, percent: '10'}\n"
       "  duration: 30s\n",
       R"({"duration_sec":30,"kind":"corrupt","percent":10,"target":"198.51.100.7"})"},
      {"network-duplicate, ip-protocol all",
       "  action: network-duplicate\n  network-duplicate: {ip-address: 198.51.100.7, percent: '5', "
       "ip-protocol: all}\n  duration: 30s\n",
       R"({"duration_sec":30,"kind":"duplicate","percent":5,"target":"198.51.100.7"})"},
      {"network-partition from",
       "  action: network-partition\n  network-partition: {ip-address: 10.0.9.0/24, direction: from}\n"
       "  duration: 1m\n",
       R"({"direction":"ingress","duration_sec":60,"kind":"partition","target":"10.0.9.0/24"})"},
      {"network-bandwidth (tc's mbps is bytes/s)",
       "  action: network-bandwidth\n  network-bandwidth: {ip-address: 10.0.5.10, rate: 1mbps, limit: 20971520, "
       "buffer: 10000}\n  duration: 30s\n",
       R"({"duration_sec":30,"kind":"bandwidth","rate_bps":8000000,"target":"10.0.5.10"})"},
      {"stress-cpu", "  action: stress-cpu\n  stress-cpu: {workers: 1, load: 50}\n  duration: 30s\n",
       R"({"cores":1,"duration_sec":30,"kind":"cpu","load":50})"},
      {"stress-mem", "  action: stress-mem\n  stress-mem: {size: 256MB}\n  duration: 30s\n",
       R"({"duration_sec":30,"kind":"memory","size":"256MB"})"},
      {"process by name, SIGKILL",
       "  action: process\n  process: {process: nginx.worker, signal: 9}\n  duration: 30s\n",
       R"({"action":"kill","duration_sec":30,"kind":"process","name":"nginx\\.worker","signal":"9"})"},
      {"process by pid, SIGSTOP: a freeze",
       "  action: process\n  process: {process: '4321', signal: 19}\n  duration: 30s\n",
       R"({"action":"freeze","duration_sec":30,"kind":"process","pid":4321})"},
      {"disk-fill in a directory, dd units",
       "  action: disk-fill\n  disk-fill: {size: 1G, path: /tmp}\n  duration: 30s\n",
       R"({"duration_sec":30,"kind":"disk","path":"/tmp","size":"1073741824"})"},
  };
  for (const auto& c : cases) {
    ChaosMeshImport r = import_chaos_mesh(std::string(kMachineHead) + c.body);
    EXPECT_TRUE(r.ok()) << c.name << ":\n" << errors_of(r);
    EXPECT_EQ(r.spec.dump(), c.spec) << c.name;
    EXPECT_TRUE(r.experiment.has_value()) << c.name;
    EXPECT_EQ(r.kind, "PhysicalMachineChaos") << c.name;
  }
  // What has no effect on this host is said, not dropped in silence.
  ChaosMeshImport delay = import_chaos_mesh(std::string(kMachineHead) + cases[0].body);
  ASSERT_EQ(delay.notes.size(), 1u);
  EXPECT_EQ(delay.notes[0], "spec.address picks machines; faultctl apply acts on the one it runs on");
  ChaosMeshImport file = import_chaos_mesh(std::string(kMachineHead) +
                                           "  action: disk-fill\n  disk-fill: {size: 512M, path: "
                                           "/tmp/fl-no-such-dir-for-chaosd/fill.dat}\n  duration: 30s\n");
  EXPECT_EQ(file.spec.value("path", ""), "/tmp/fl-no-such-dir-for-chaosd") << errors_of(file);
  ASSERT_EQ(file.notes.size(), 1u);
  EXPECT_EQ(file.notes[0],
            "spec.disk-fill.path: the fill goes in /tmp/fl-no-such-dir-for-chaosd (Faultline writes its own file "
            "there)");
}

TEST(ChaosMesh, PhysicalMachineChaosActionsAHostDoesNotTakeAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  action: network-dns\n  duration: 30s\n",
       "F:6:11: spec.action: 'network-dns': Faultline fails a name's queries (faultctl run dns) but rewrites no "
       "resolv.conf and maps no names to addresses\n"},
      {"  action: http-abort\n  duration: 30s\n",
       "F:6:11: spec.action: 'http-abort': chaosd faults the requests this host receives; Faultline's HTTP faults "
       "act client-side (faultctl run http, or the guard)\n"},
      {"  action: jvm-gc\n  duration: 30s\n",
       "F:6:11: spec.action: 'jvm-gc': no such Faultline fault (it imports network-delay, -loss, -corrupt, "
       "-duplicate, -partition, -bandwidth, stress-cpu, stress-mem, process and disk-fill)\n"},
      {"  action: process\n  process: {process: nginx, signal: 9, recoverCmd: 'systemctl start nginx'}\n"
       "  duration: 30s\n",
       "F:7:40: spec.process.recoverCmd: Faultline runs no commands: a frozen process resumes at the end by "
       "itself\n"},
      {"  action: network-delay\n  network-delay: {latency: 10ms, source-port: '80'}\n  duration: 30s\n",
       "F:7:18: spec.network-delay.ip-address: required here: the peers (addresses, CIDRs or host names, in "
       "ip-address or hostname) the fault hits; a whole device's traffic is not a target (faultctl run --force "
       "does that)\n"
       "F:7:34: spec.network-delay.source-port: Faultline matches the remote port (egress-port), not this host's "
       "own\n"},
      {"  action: stress-mem\n  stress-mem: {size: 50%}\n  duration: 30s\n",
       "F:7:22: spec.stress-mem.size: '50%': a share of memory; write a size, like 512MB (Faultline keeps some "
       "memory free whatever the size)\n"},
      {"  action: network-loss\n  network-delay: {latency: 10ms}\n  duration: 30s\n",
       "F:6:3: spec.network-loss: missing: action network-loss needs its fields\n"
       "F:7:18: spec.network-delay: the fields of action network-delay, not of network-loss\n"},
      {"  action: network-loss\n  network-loss: {ip-address: 10.0.0.1, percent: '5', egress-port: '80,443'}\n",
       "F:6:3: spec.duration: required here: a Faultline fault always ends (at most 1h); Chaos Mesh's "
       "run-until-deleted has no equivalent without a controller\n"
       "F:7:67: spec.network-loss.egress-port: '80,443': Faultline takes one port or one range (A:B) per fault\n"},
      {"  action: disk-fill\n  disk-fill: {size: 1T, path: /tmp}\n  duration: 30s\n",
       "F:7:21: spec.disk-fill.size: '1T': expected a number with a dd unit (c, w, b, kB, K, MB, M, GB, G)\n"},
  };
  for (const auto& [body, want] : cases) {
    ChaosMeshImport r = import_chaos_mesh(std::string(kMachineHead) + body);
    EXPECT_FALSE(r.ok()) << body;
    EXPECT_EQ(errors_of(r), want) << body;
  }
}

// chaosd's attack JSON (the body its HTTP API takes at /api/attack/KIND, under
// KIND): the experiment the PhysicalMachineChaos of the same action yields.
TEST(ChaosMesh, ChaosdAttackJsonBecomesThePhysicalMachineExperiment) {
  const std::vector<std::tuple<const char*, std::string, std::string>> cases = {
      {"network delay", R"({"network": {"action": "delay", "device": "eth0", "ip-address": "10.0.5.10",
  "latency": "100ms", "jitter": "10ms", "duration": "30s"}})",
       "  action: network-delay\n  network-delay: {device: eth0, ip-address: 10.0.5.10, latency: 100ms, "
       "jitter: 10ms}\n  duration: 30s\n"},
      {"network loss", R"({"network": {"action": "loss", "ip-address": "192.0.2.10", "percent": "50",
  "egress-port": "8001:8010", "ip-protocol": "tcp", "duration": "10s", "uid": "loss-1"}})",
       "  action: network-loss\n  network-loss: {ip-address: 192.0.2.10, percent: '50', egress-port: '8001:8010', "
       "ip-protocol: tcp}\n  duration: 10s\n"},
      {"network corrupt", R"({"network": {"action": "corrupt", "ip-address": "198.51.100.7", "percent": "10",
  "duration": "30s"}})",
       "  action: network-corrupt\n  network-corrupt: {ip-address: 198.51.100.7, percent: '10'}\n  duration: 30s\n"},
      {"network duplicate", R"({"network": {"action": "duplicate", "ip-address": "198.51.100.7", "percent": "5",
  "duration": "30s"}})",
       "  action: network-duplicate\n  network-duplicate: {ip-address: 198.51.100.7, percent: '5'}\n"
       "  duration: 30s\n"},
      {"network partition", R"({"network": {"action": "partition", "ip-address": "10.0.9.0/24",
  "direction": "from", "duration": "1m"}})",
       "  action: network-partition\n  network-partition: {ip-address: 10.0.9.0/24, direction: from}\n"
       "  duration: 1m\n"},
      {"network bandwidth", R"({"network": {"action": "bandwidth", "ip-address": "10.0.5.10", "rate": "1mbps",
  "limit": 20971520, "buffer": 10000, "duration": "30s"}})",
       "  action: network-bandwidth\n  network-bandwidth: {ip-address: 10.0.5.10, rate: 1mbps, limit: 20971520, "
       "buffer: 10000}\n  duration: 30s\n"},
      {"stress cpu", R"({"stress": {"action": "cpu", "workers": 1, "load": 50, "duration": "30s"}})",
       "  action: stress-cpu\n  stress-cpu: {workers: 1, load: 50}\n  duration: 30s\n"},
      {"stress mem", R"({"stress": {"action": "mem", "size": "256MB", "duration": "30s"}})",
       "  action: stress-mem\n  stress-mem: {size: 256MB}\n  duration: 30s\n"},
      {"process kill, its signal", R"({"process": {"action": "kill", "process": "nginx.worker", "signal": 15,
  "duration": "30s"}})",
       "  action: process\n  process: {process: nginx.worker, signal: 15}\n  duration: 30s\n"},
      {"process kill, chaosd's default SIGKILL",
       R"({"process": {"action": "kill", "process": "4321", "duration": "30s"}})",
       "  action: process\n  process: {process: '4321', signal: 9}\n  duration: 30s\n"},
      {"process stop: a freeze", R"({"process": {"action": "stop", "process": "4321", "duration": "30s"}})",
       "  action: process\n  process: {process: '4321', signal: 19}\n  duration: 30s\n"},
      {"disk fill", R"({"disk": {"action": "fill", "size": "1G", "path": "/tmp", "fill-by-fallocate": true,
  "duration": "30s"}})",
       "  action: disk-fill\n  disk-fill: {size: 1G, path: /tmp, fill-by-fallocate: true}\n  duration: 30s\n"},
  };
  for (const auto& [name, json, machine] : cases) {
    ChaosMeshImport r = import_chaosd_attack(json);
    EXPECT_TRUE(r.ok()) << name << ":\n" << errors_of(r);
    EXPECT_TRUE(r.experiment.has_value()) << name;
    EXPECT_EQ(r.kind, "chaosd attack") << name;
    EXPECT_TRUE(looks_like_chaosd_attack(json)) << name;
    ChaosMeshImport same = import_chaos_mesh(std::string(kMachineHead) + machine);
    ASSERT_TRUE(same.ok()) << name << ":\n" << errors_of(same);
    EXPECT_EQ(r.spec.dump(), same.spec.dump()) << name;
    EXPECT_EQ(r.action, same.action) << name;
  }
  EXPECT_EQ(import_chaosd_attack(std::get<1>(cases[1])).name, "loss-1");
  EXPECT_EQ(import_chaosd_attack(std::get<1>(cases[0])).name, "chaosd-network-delay");
  EXPECT_FALSE(looks_like_chaosd_attack("apiVersion: chaos-mesh.org/v1alpha1\n"));
  EXPECT_FALSE(looks_like_chaosd_attack(R"({"apiVersion": "faultline.dev/v1", "kind": "Policy"})"));
}

TEST(ChaosMesh, ChaosdAttacksAHostDoesNotTakeAreRefusedEachWithItsSentence) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"network": {"action": "dns", "dns-server": "8.8.8.8", "duration": "30s"}})",
       "F:1:24: network.action: 'network-dns': Faultline fails a name's queries (faultctl run dns) but rewrites no "
       "resolv.conf and maps no names to addresses\n"},
      {R"({"http": {"action": "abort", "duration": "30s"}})",
       "F:1:21: http.action: 'http-abort': chaosd faults the requests this host receives; Faultline's HTTP faults "
       "act client-side (faultctl run http, or the guard)\n"},
      {R"({"process": {"action": "kill", "process": "nginx", "recoverCmd": "systemctl start nginx",
  "duration": "30s"}})",
       "F:1:52: process.recoverCmd: Faultline runs no commands: a frozen process resumes at the end by itself\n"},
      {R"({"jvm": {"action": "gc", "duration": "30s"}})",
       "F:1:20: jvm.action: 'jvm gc': no such Faultline fault (it imports network-delay, -loss, -corrupt, "
       "-duplicate, -partition, -bandwidth, stress-cpu, stress-mem, process and disk-fill)\n"},
      {R"({"disk": {"action": "write-payload", "size": "1G", "duration": "30s"}})",
       "F:1:21: disk.action: 'disk-write-payload': disk I/O load is not a Faultline fault (faultctl run syscall "
       "fails or slows writes)\n"},
      {R"({"process": {"action": "stop", "process": "4321", "signal": 9, "duration": "30s"}})",
       "F:1:61: process.signal: action stop sends SIGSTOP (19): leave signal out\n"},
      {R"({"network": {"action": "delay", "ip-address": "10.0.0.1", "latency": "1.5ms", "source-port": "80",
  "duration": "30s"}})",
       "F:1:70: network.latency: '1.5ms': Faultline takes whole milliseconds\n"
       "F:1:79: network.source-port: Faultline matches the remote port (egress-port), not this host's own\n"},
      {R"({"stress": {"action": "cpu", "workers": 1, "load": 50}})",
       "F:1:12: stress.duration: required here: a Faultline fault always ends (at most 1h); Chaos Mesh's "
       "run-until-deleted has no equivalent without a controller\n"},
      {R"({"stress": {"action": "cpu", "workers": 1, "load": 50, "duration": "30s"}, "disk": {}})",
       "F:1:1: <document>: expected one attack: {\"network\" | \"stress\" | \"process\" | \"disk\": the body "
       "chaosd's /api/attack/KIND takes}\n"},
      {"{\"network\": {\"action\": \"delay\",\n  \"latency\": }}", "F:2:14: <document>: not JSON: "},
  };
  for (const auto& [json, want] : cases) {
    ChaosMeshImport r = import_chaosd_attack(json);
    EXPECT_FALSE(r.ok()) << json;
    const std::string got = errors_of(r);
    if (want.ends_with("not JSON: "))
      EXPECT_EQ(got.substr(0, want.size()), want) << json;
    else
      EXPECT_EQ(got, want) << json;
  }
}

// faultctl apply -f: the run parser's refusal lands on the field; --dry-run
// prints the run command and the plan.
TEST(ChaosMesh, ApplyDryRunAndRefusalsThroughTheCli) {
  char path[] = "/tmp/fl-chaos-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string doc = std::string(kHead) +
                          "loss\nspec:\n  action: loss\n  externalTargets: ['192.0.2.10']\n  loss: {loss: '250'}\n"
                          "  duration: 30s\n";
  ASSERT_EQ(::write(fd, doc.data(), doc.size()), static_cast<ssize_t>(doc.size()));
  ::close(fd);
  auto r = fltest::run_command({FAULTCTL_PATH, "apply", "-f", path, "--dry-run"});
  ::unlink(path);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find(std::string(path) + ":8:16: spec.loss.loss: spec.percent (--percent): '250' is outside 0-100\n"),
            std::string::npos)
      << r.err;
  // --cgroup for a file that selects no instance: refused, not ignored.
  fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  const std::string ok = std::string(kHead) +
                         "loss\nspec:\n  action: loss\n  externalTargets: ['192.0.2.10']\n  loss: {loss: '25'}\n"
                         "  duration: 30s\n";
  ASSERT_EQ(::write(fd, ok.data(), ok.size()), static_cast<ssize_t>(ok.size()));
  ::close(fd);
  auto stray = fltest::run_command({FAULTCTL_PATH, "apply", "-f", path, "--cgroup", "/", "--dry-run"});
  ::unlink(path);
  EXPECT_TRUE(stray.status.is(2)) << stray.describe();
  EXPECT_NE(stray.err.find("selects no instance (no selector.labelSelectors {service: NAME}); leave --cgroup out"),
            std::string::npos)
      << stray.err;
  auto missing = fltest::run_command({FAULTCTL_PATH, "apply"});
  EXPECT_TRUE(missing.status.is(2)) << missing.describe();
  EXPECT_EQ(missing.err, "faultctl apply: missing -f FILE\n");
}

// What `faultctl catalogue render --format chaos-mesh` writes re-imports:
// mode one with labelSelectors {service: NAME} is the instance --cgroup names.
// A StressChaos re-imports to the very experiment the catalogue's JSON render
// is. A NetworkChaos cannot say what the JSON render says (a tcp toxic on
// HOST:PORT; NetworkChaos has no port and no toxics): it re-imports to the
// packet fault on HOST that Chaos Mesh itself would inject, and this test
// pins that difference. A PodChaos (process_kill_one) re-imports to the same
// process kill. The HTTP templates have no Chaos Mesh form.
TEST(ChaosMesh, CatalogueRendersReimport) {
  const std::string cgroup = "/sys/fs/cgroup/fl-chaos-reimport";
  const ChaosMeshTarget target{"web", "run1"};
  const std::map<std::string, nlohmann::json> params = {
      {"upstream_delay", {{"target", "10.0.0.7:5432"}, {"latency_ms", 200}, {"duration_s", 60}}},
      {"upstream_partition", {{"target", "10.0.0.7:5432"}, {"duration_s", 45}}},
      {"upstream_http_error", {{"target", "10.0.0.7:80"}, {"status", 503}, {"percent", 20}, {"duration_s", 60}}},
      {"llm_provider_overloaded",
       {{"target", "10.0.0.7:80"}, {"provider", "anthropic"}, {"percent", 20}, {"duration_s", 60}}},
      {"cpu_stress_one", {{"load", 80}, {"duration_s", 30}}},
      {"process_kill_one", {{"duration_s", 30}}},
  };
  // The packet experiment each NetworkChaos template re-imports to.
  const std::map<std::string, std::string> packet = {
      {"upstream_delay",
       R"({"cgroup":"/sys/fs/cgroup/fl-chaos-reimport","delay_ms":200,"direction":"egress","duration_sec":60,)"
       R"("kind":"latency","target":"10.0.0.7"})"},
      {"upstream_partition",
       R"({"cgroup":"/sys/fs/cgroup/fl-chaos-reimport","direction":"egress","duration_sec":45,"kind":"partition",)"
       R"("target":"10.0.0.7"})"},
  };
  size_t same = 0, packet_seen = 0;
  for (const auto& t : catalogue()) {
    ASSERT_TRUE(params.contains(t.name)) << t.name << ": a new template needs a row here";
    auto json = render_template(t, params.at(t.name), TemplateInstance{cgroup});
    ASSERT_TRUE(json) << t.name << ": " << json.error().message;
    auto yaml = render_chaos_mesh(t, params.at(t.name), target);
    if (!yaml) {
      EXPECT_EQ(json->spec["kind"], "http") << t.name << ": " << yaml.error().message;
      continue;
    }
    ChaosMeshImport none = import_chaos_mesh(*yaml);
    ChaosMeshImport back = import_chaos_mesh(*yaml, {cgroup});
    // Without --cgroup, the selector is refused by name.
    ASSERT_FALSE(none.ok()) << t.name;
    EXPECT_EQ(none.errors[0].path, "spec.selector.labelSelectors.service") << errors_of(none);
    EXPECT_NE(none.errors[0].reason.find("'web'"), std::string::npos) << errors_of(none);
    ASSERT_TRUE(back.ok()) << t.name << ":\n" << *yaml << errors_of(back);
    ASSERT_TRUE(back.experiment.has_value());
    EXPECT_EQ(back.service, "web");
    if (back.kind != "NetworkChaos") {
      EXPECT_EQ(back.spec, json->spec) << t.name << ": " << back.spec.dump() << " vs " << json->spec.dump();
      const auto* a = std::get_if<ResourceSpec>(&back.experiment->fault);
      const auto* b = std::get_if<ResourceSpec>(&json->experiment.fault);
      ASSERT_NE(a, nullptr);
      ASSERT_NE(b, nullptr);
      EXPECT_EQ(a->kind, b->kind);
      EXPECT_EQ(a->action, b->action);
      EXPECT_EQ(a->signal, b->signal);
      EXPECT_EQ(a->cores, b->cores);
      EXPECT_DOUBLE_EQ(a->load, b->load);
      EXPECT_EQ(a->duration_ns, b->duration_ns);
      EXPECT_EQ(a->cgroup, b->cgroup);
      ++same;
    } else {
      ASSERT_TRUE(packet.contains(t.name)) << t.name;
      EXPECT_EQ(back.spec.dump(), packet.at(t.name)) << t.name;
      EXPECT_EQ(json->spec["kind"], "tcp") << t.name << ": the JSON render changed; the pinned difference is stale";
      ASSERT_NE(std::get_if<FaultSpec>(&back.experiment->fault), nullptr);
      ++packet_seen;
    }
  }
  EXPECT_EQ(same, 2u);
  EXPECT_EQ(packet_seen, 2u);
}

// faultctl catalogue render --format chaos-mesh | faultctl apply -f -: refused
// without --cgroup (exit 2, naming the selector), planned with it (the root
// cgroup: --dry-run applies nothing).
TEST(ChaosMesh, RenderedFileAppliesWithCgroup) {
  auto rendered = fltest::run_command({FAULTCTL_PATH, "catalogue", "render", "cpu_stress_one", "--param", "load=50",
                                       "--param", "duration_s=30", "--service", "web", "--format", "chaos-mesh"});
  ASSERT_TRUE(rendered.status.is(0)) << rendered.describe();
  char path[] = "/tmp/fl-chaos-render-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, rendered.out.data(), rendered.out.size()), static_cast<ssize_t>(rendered.out.size()));
  ::close(fd);
  auto refused = fltest::run_command({FAULTCTL_PATH, "apply", "-f", path, "--dry-run"});
  auto planned = fltest::run_command({FAULTCTL_PATH, "apply", "-f", path, "--cgroup", "/", "--dry-run"});
  ::unlink(path);
  EXPECT_TRUE(refused.status.is(2)) << refused.describe();
  EXPECT_NE(refused.err.find("spec.selector.labelSelectors.service: 'web' selects pods"), std::string::npos)
      << refused.err;
  EXPECT_TRUE(planned.status.is(0)) << planned.describe();
  EXPECT_NE(planned.err.find(R"("cgroup":"/","cores":1,"duration_sec":30,"kind":"cpu","load":50)"), std::string::npos)
      << planned.err;
}

}  // namespace
}  // namespace faultline
