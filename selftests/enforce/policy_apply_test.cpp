// faultctl policy apply / delete / export / diff against the kernel: a cgroup
// scope enforcing with no faultctl running, the same file twice, export ->
// apply -> export, the host-wide scope (a deny for a TEST-NET address only),
// bad input that leaves nothing, a scope of 70k rules whose last decides, and
// 100 applies under a hammer of connects that never see a decision neither
// policy makes.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "enforce_env.h"
#include "loader/applied_policy.h"
#include "loader/bpffs.h"

namespace flenf {
namespace {

class PolicyApplyTest : public PolicyFileTest {
 protected:
  [[nodiscard]] bool pinned_policy() const {
    struct stat st {};
    return ::stat((bpffs_root_ + "/policy").c_str(), &st) == 0;
  }
};

std::string header(const std::string& name) {
  return "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: " + name + "\nspec:\n  egress:\n";
}

// Policy A: only P1 allowed, the rest EACCES. Policy B: P1 denied with
// ENETUNREACH, the rest allowed. A torn mix (A's default and errno with B's
// deny trie) would refuse P1 with EACCES, which neither makes.
std::string policy_a(const std::string& cg, uint16_t p1) {
  return header("alt-a") + "    - cgroup: " + cg +
         "\n      mode: enforce\n      default_allow: false\n      deny_errno: EACCES\n      rules:\n"
         "        - {name: p1, action: allow, cidr: 127.0.0.1/32, ports: [" +
         std::to_string(p1) + "], proto: tcp}\n";
}

std::string policy_b(const std::string& cg, uint16_t p1) {
  return header("alt-b") + "    - cgroup: " + cg +
         "\n      mode: enforce\n      default_allow: true\n      deny_errno: ENETUNREACH\n      rules:\n"
         "        - {name: p1, action: deny, cidr: 127.0.0.1/32, ports: [" +
         std::to_string(p1) + "], proto: tcp, reason: the alternate}\n";
}

std::string tcp_label(uint16_t port) { return "tcp 127.0.0.1:" + std::to_string(port); }

TEST_F(PolicyApplyTest, CgroupScopeEnforcesWithNoFaultctlRunning) {
  TestCgroup cg(unique_name("pa"));
  TcpServer s1, s2;
  auto applied = run({kFaultctl, "policy", "apply", file(policy_a(cg.relative(), s1.port()))});
  ASSERT_TRUE(applied.status.is(0)) << applied.describe();
  EXPECT_NE(applied.out.find("applied policy alt-a: generation 1, 1 scope"), std::string::npos) << applied.out;
  // faultctl has exited: the pinned programs decide alone.
  auto inside = run({kProbe, "connect", "tcp", "127.0.0.1", std::to_string(s1.port()), "3", "connect", "tcp",
                     "127.0.0.1", std::to_string(s2.port()), "3"},
                    30s, {.cgroup = cg.path()});
  auto r = results(inside.out);
  EXPECT_EQ(count_of(r[tcp_label(s1.port())], "ok"), 3) << inside.describe();
  EXPECT_EQ(count_of(r[tcp_label(s2.port())], "EACCES"), 3) << inside.describe();
  // Outside the cgroup nothing is judged.
  auto outside = run({kProbe, "connect", "tcp", "127.0.0.1", std::to_string(s2.port()), "2"});
  EXPECT_EQ(count_of(results(outside.out)[tcp_label(s2.port())], "ok"), 2) << outside.describe();
  auto status = run({kFaultctl, "status"});
  EXPECT_NE(status.out.find("cgroup " + cg.relative() +
                            ": enforce, default deny, deny errno EACCES (policy alt-a, 1 rule) allowed 3 denied 3"),
            std::string::npos)
      << status.describe();

  auto deleted = run({kFaultctl, "policy", "delete"});
  ASSERT_TRUE(deleted.status.is(0)) << deleted.describe();
  EXPECT_NE(deleted.out.find("- scope cgroup " + cg.relative()), std::string::npos) << deleted.out;
  EXPECT_FALSE(pinned_policy()) << "delete leaves no pin";
  auto after = run({kProbe, "connect", "tcp", "127.0.0.1", std::to_string(s2.port()), "2"}, 30s, {.cgroup = cg.path()});
  EXPECT_EQ(count_of(results(after.out)[tcp_label(s2.port())], "ok"), 2) << after.describe();
}

// Rule ids are 32-bit: a scope of 70,000 address rules (JSON, the reader's
// fast path) is applied whole, and the rule past id 65535 decides.
TEST_F(PolicyApplyTest, ScopeOfSeventyThousandRulesAndTheLastDecides) {
  TestCgroup cg(unique_name("pa"));
  TcpServer s1, s2;
  std::string text =
      "{\"apiVersion\": \"faultline.dev/v1\", \"kind\": \"Policy\", \"metadata\": {\"name\": \"wide\"},"
      " \"spec\": {\"egress\": [{\"cgroup\": \"" +
      cg.relative() +
      "\", \"mode\": \"enforce\", \"default_allow\": true, \"deny_errno\": \"ENETUNREACH\", \"rules\": [\n";
  constexpr int kRules = 70000;
  for (int i = 0; i < kRules - 1; ++i)
    text += "{\"name\": \"r" + std::to_string(i) + "\", \"action\": \"deny\", \"cidr\": \"10." +
            std::to_string(i >> 16) + "." + std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255) +
            "/32\"},\n";
  text += "{\"name\": \"last\", \"action\": \"deny\", \"cidr\": \"127.0.0.1/32\", \"ports\": [" +
          std::to_string(s2.port()) + "], \"proto\": \"tcp\"}\n]}]}}\n";
  auto applied = run({kFaultctl, "policy", "apply", file(text)}, 120s);
  ASSERT_TRUE(applied.status.is(0)) << applied.err << applied.out.substr(0, 400);
  EXPECT_NE(applied.out.find("applied policy wide: generation 1, 1 scope"), std::string::npos)
      << applied.out.substr(0, 400);
  auto inside = run({kProbe, "connect", "tcp", "127.0.0.1", std::to_string(s1.port()), "2", "connect", "tcp",
                     "127.0.0.1", std::to_string(s2.port()), "2"},
                    30s, {.cgroup = cg.path()});
  auto r = results(inside.out);
  EXPECT_EQ(count_of(r[tcp_label(s1.port())], "ok"), 2) << inside.describe();
  EXPECT_EQ(count_of(r[tcp_label(s2.port())], "ENETUNREACH"), 2) << inside.describe();
  auto status = run({kFaultctl, "status"});
  EXPECT_NE(status.out.find("(policy wide, 70000 rules) allowed 2 denied 2"), std::string::npos) << status.describe();
}

TEST_F(PolicyApplyTest, SameFileTwiceChangesNothingAndExportRoundTrips) {
  TestCgroup cg(unique_name("pa"));
  const std::string f = file(policy_b(cg.relative(), 4242));
  auto first = run({kFaultctl, "policy", "apply", f});
  ASSERT_TRUE(first.status.is(0)) << first.describe();
  auto again = run({kFaultctl, "policy", "apply", f});
  ASSERT_TRUE(again.status.is(0)) << again.describe();
  EXPECT_EQ(again.out, "policy alt-b: unchanged (already live)\n");
  auto dry = run({kFaultctl, "policy", "apply", "--dry-run", file(policy_a(cg.relative(), 4242))});
  ASSERT_TRUE(dry.status.is(0)) << dry.describe();
  EXPECT_NE(dry.out.find("dry run, nothing changed"), std::string::npos) << dry.out;
  EXPECT_NE(
      dry.out.find(
          "~ cgroup " + cg.relative() +
          " rule p1: was deny 127.0.0.1 ports 4242 tcp (reason: the alternate); now allow 127.0.0.1 ports 4242 tcp\n"),
      std::string::npos)
      << dry.out;

  for (const std::string format : {"yaml", "json"}) {
    auto exported = run({kFaultctl, "policy", "export", "--format", format});
    ASSERT_TRUE(exported.status.is(0)) << exported.describe();
    const std::string saved = file(exported.out);
    ASSERT_TRUE(run({kFaultctl, "policy", "delete"}).status.is(0));
    auto reapplied = run({kFaultctl, "policy", "apply", saved});
    ASSERT_TRUE(reapplied.status.is(0)) << reapplied.describe() << "\n" << exported.out;
    EXPECT_NE(reapplied.out.find("applied policy alt-b"), std::string::npos) << reapplied.out;
    auto second = run({kFaultctl, "policy", "export", "--format", format});
    EXPECT_EQ(second.out, exported.out) << "export -> apply -> export differs (" << format << ")";
    auto same = run({kFaultctl, "policy", "apply", saved});
    EXPECT_EQ(same.out, "policy alt-b: unchanged (already live)\n") << same.describe();
  }
}

// The bpf() calls of `faultctl policy apply FILE` (strace -c), and what it printed.
struct TracedApply {
  CommandResult ran;
  long bpf_calls = -1;
};

TracedApply traced_apply(const std::string& policy_file, const std::string& trace_file) {
  TracedApply t;
  t.ran =
      run({"strace", "-f", "-c", "-e", "trace=bpf", "-o", trace_file, kFaultctl, "policy", "apply", policy_file}, 120s);
  std::ifstream in(trace_file);
  std::string line;
  while (std::getline(in, line)) {
    // "100.00    0.001234          12       100         3 bpf"
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (!w.empty() && w.back() == "bpf" && w.size() >= 5) t.bpf_calls = std::stol(w[3]);
  }
  return t;
}

// 20,000 rules (the canonical text is hundreds of 4 KiB entries): the second
// apply of the same file reads the stored digest, not the text, and writes
// nothing; a changed file is written whole (batch writes), and export reads
// the text back whole (batch reads).
TEST_F(PolicyApplyTest, AnUnchangedLargeApplyReadsTheDigestAloneAndWritesNothing) {
  if (::access("/usr/bin/strace", X_OK) != 0) GTEST_SKIP() << "strace is missing: run scripts/install-deps.sh";
  TestCgroup cg(unique_name("pa"));
  auto make = [&](const std::string& name, int last_octet) {
    std::string text = "{\"apiVersion\": \"faultline.dev/v1\", \"kind\": \"Policy\", \"metadata\": {\"name\": \"" +
                       name + "\"}, \"spec\": {\"egress\": [{\"cgroup\": \"" + cg.relative() +
                       "\", \"mode\": \"enforce\", \"default_allow\": true, \"rules\": [\n";
    constexpr int kRules = 20000;
    for (int i = 0; i < kRules; ++i)
      text += std::string(i ? ",\n" : "") + "{\"name\": \"r" + std::to_string(i) +
              "\", \"action\": \"deny\", \"cidr\": \"" +
              (i == kRules - 1 ? "10.9.9." + std::to_string(last_octet)
                               : "10." + std::to_string(i >> 16) + "." + std::to_string((i >> 8) & 255) + "." +
                                     std::to_string(i & 255)) +
              "/32\"}";
    return text + "\n]}]}}\n";
  };
  const std::string big = file(make("big", 31));
  const std::string trace = file("");
  auto first = traced_apply(big, trace);
  ASSERT_TRUE(first.ran.status.is(0)) << first.ran.err << first.ran.out.substr(0, 400);
  EXPECT_NE(first.ran.out.find("applied policy big: generation 1"), std::string::npos) << first.ran.out.substr(0, 400);
  auto again = traced_apply(big, trace);
  ASSERT_TRUE(again.ran.status.is(0)) << again.ran.describe();
  EXPECT_EQ(again.ran.out, "policy big: unchanged (already live)\n");
  // Open the two shared pins, read the live generation, its source slot and
  // the header: a handful, where reading the text back took one per 4 KiB.
  EXPECT_GT(again.bpf_calls, 0) << "strace counted no bpf() call";
  EXPECT_LE(again.bpf_calls, 16) << "an unchanged apply made " << again.bpf_calls << " bpf() calls (the first, "
                                 << first.bpf_calls << ")";

  std::cout << "bpf() calls: first apply " << first.bpf_calls << ", the same file again " << again.bpf_calls << "\n";
  // One rule changed: applied (a new generation), and the text reads back whole.
  auto changed = traced_apply(file(make("big", 32)), trace);
  ASSERT_TRUE(changed.ran.status.is(0)) << changed.ran.describe();
  EXPECT_NE(changed.ran.out.find("applied policy big: generation"), std::string::npos) << changed.ran.out;
  auto exported = run({kFaultctl, "policy", "export", "--format", "json"}, 120s);
  ASSERT_TRUE(exported.status.is(0)) << exported.describe();
  EXPECT_NE(exported.out.find("\"10.9.9.32\""), std::string::npos) << "the changed rule is in the exported text";
  EXPECT_EQ(exported.out.find("\"10.9.9.31\""), std::string::npos) << "the old one is not";
  auto reapplied = run({kFaultctl, "policy", "apply", file(exported.out)}, 120s);
  EXPECT_EQ(reapplied.out, "policy big: unchanged (already live)\n") << reapplied.describe();
}

TEST_F(PolicyApplyTest, HostWideScopeDeniesOnlyATestAddress) {
  // The root cgroup of a shared machine: a deny for 192.0.2.77 (TEST-NET-1,
  // never a real peer) alone, removed by the fixture on every path.
  const std::string f = file(header("host-testnet") +
                             "    - all: true\n      mode: enforce\n      rules:\n"
                             "        - {name: testnet, action: deny, cidr: 192.0.2.77, proto: udp}\n");
  auto applied = run({kFaultctl, "policy", "apply", f});
  ASSERT_TRUE(applied.status.is(0)) << applied.describe();
  TcpServer s;
  auto r = run({kProbe, "connect", "udp", "192.0.2.77", "9", "2", "connect", "udp", "192.0.2.78", "9", "2", "connect",
                "tcp", "127.0.0.1", std::to_string(s.port()), "2"});
  auto c = results(r.out);
  EXPECT_EQ(count_of(c["udp 192.0.2.77:9"], "EPERM"), 2) << r.describe();
  EXPECT_EQ(count_of(c["udp 192.0.2.78:9"], "ok"), 2) << r.describe();
  EXPECT_EQ(count_of(c[tcp_label(s.port())], "ok"), 2) << r.describe();
  auto emptied = run({kFaultctl, "policy", "apply", file(header("none") + "    []\n")});
  ASSERT_TRUE(emptied.status.is(0)) << emptied.describe();
  EXPECT_NE(emptied.out.find("applied policy removed"), std::string::npos) << emptied.out;
  EXPECT_FALSE(pinned_policy());
  auto after = run({kProbe, "connect", "udp", "192.0.2.77", "9", "2"});
  EXPECT_EQ(count_of(results(after.out)["udp 192.0.2.77:9"], "ok"), 2) << after.describe();
}

TEST_F(PolicyApplyTest, ASectionReplacesTheLiveOneAndDroppedScopesDetach) {
  TestCgroup one(unique_name("pa")), two(unique_name("pa"));
  TcpServer s;
  const std::string deny =
      "\n      mode: enforce\n      rules:\n        - {name: d, action: deny, cidr: 127.0.0.1, ports: [" +
      std::to_string(s.port()) + "]}\n";
  ASSERT_TRUE(
      run({kFaultctl, "policy", "apply",
           file(header("two") + "    - cgroup: " + one.relative() + deny + "    - cgroup: " + two.relative() + deny)})
          .status.is(0));
  auto probe = [&](const TestCgroup& cg) {
    auto r = run({kProbe, "connect", "tcp", "127.0.0.1", std::to_string(s.port()), "1"}, 30s, {.cgroup = cg.path()});
    return results(r.out)[tcp_label(s.port())];
  };
  EXPECT_EQ(count_of(probe(one), "EPERM"), 1);
  EXPECT_EQ(count_of(probe(two), "EPERM"), 1);
  auto replaced = run({kFaultctl, "policy", "apply", file(header("one") + "    - cgroup: " + two.relative() + deny)});
  ASSERT_TRUE(replaced.status.is(0)) << replaced.describe();
  EXPECT_NE(replaced.out.find("- scope cgroup " + one.relative()), std::string::npos) << replaced.out;
  EXPECT_EQ(count_of(probe(one), "ok"), 1) << "the dropped scope still judges";
  EXPECT_EQ(count_of(probe(two), "EPERM"), 1);
  struct stat st {};
  EXPECT_NE(::stat((bpffs_root_ + "/policy/scopes/cg%2F" + one.relative().substr(1)).c_str(), &st), 0)
      << "the dropped scope's pins remain";
}

TEST_F(PolicyApplyTest, BadInputExitsTwoAndAppliesNothing) {
  struct Case {
    std::string body, message;
  };
  const std::vector<Case> cases = {
      {"    - cgroup: /flenf-no-such-cgroup\n      rules: []\n",
       "spec.egress[0].cgroup /flenf-no-such-cgroup: no cgroup v2 directory"},
      {"    - all: true\n      rules: []\n  faults:\n    - {name: l, kind: loss, target: [192.0.2.1], percent: 5, "
       "duration: 1s}\n",
       "spec.faults: apply writes the egress section only"},
      {"    - all: true\n      mode: enforced\n      rules: []\n", "'enforced': expected monitor or enforce"},
  };
  for (const auto& c : cases) {
    auto r = run({kFaultctl, "policy", "apply", file(header("bad") + c.body)});
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.describe();
    EXPECT_FALSE(pinned_policy()) << c.body;
  }
  auto none = run({kFaultctl, "policy", "export"});
  EXPECT_TRUE(none.status.is(1)) << none.describe();
  EXPECT_EQ(none.err, "faultctl policy export: no policy is applied\n");
}

// Several processes connect without pause while 100 applies alternate A and B:
// every connect must get an answer A or B gives (P1: ok or ENETUNREACH; P2: ok
// or EACCES), never a mix.
TEST_F(PolicyApplyTest, HundredAppliesUnderConnectsNeverMixTwoPolicies) {
  TestCgroup cg(unique_name("pa"));
  TcpServer s1, s2;
  const std::string a = file(policy_a(cg.relative(), s1.port())), b = file(policy_b(cg.relative(), s1.port()));
  ASSERT_TRUE(run({kFaultctl, "policy", "apply", a}).status.is(0));
  const std::string stop = "/tmp/" + unique_name("stop");
  files_.push_back(stop);
  const std::string loop = "while [ ! -e " + stop + " ]; do " + kProbe + " connect tcp 127.0.0.1 " +
                           std::to_string(s1.port()) + " 50 connect tcp 127.0.0.1 " + std::to_string(s2.port()) +
                           " 50; done";
  std::vector<ChildProcess> hammers;
  for (int i = 0; i < 3; ++i) hammers.push_back(spawn({"/bin/sh", "-c", loop}, {.cgroup = cg.path()}));
  int applies = 0;
  for (int i = 0; i < 100; ++i) {
    auto r = run({kFaultctl, "policy", "apply", i % 2 ? a : b});
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    applies += r.out.find("applied policy") != std::string::npos;
    for (auto& h : hammers) (void)h.out();  // keep their pipes drained
  }
  std::ofstream(stop) << "stop";
  Counts p1, p2;
  for (auto& h : hammers) {
    ASSERT_TRUE(h.wait(30s).has_value());
    auto res = results(h.out());
    for (const auto& [k, n] : res[tcp_label(s1.port())]) p1[k] += n;
    for (const auto& [k, n] : res[tcp_label(s2.port())]) p2[k] += n;
  }
  EXPECT_EQ(applies, 100);
  long p1_total = 0, p2_total = 0;
  for (const auto& [k, n] : p1) p1_total += n;
  for (const auto& [k, n] : p2) p2_total += n;
  EXPECT_EQ(p1_total, count_of(p1, "ok") + count_of(p1, "ENETUNREACH")) << "P1: " << show(p1);
  EXPECT_EQ(p2_total, count_of(p2, "ok") + count_of(p2, "EACCES")) << "P2: " << show(p2);
  // Both policies were seen deciding while the applies ran.
  EXPECT_GT(count_of(p1, "ENETUNREACH"), 0) << show(p1);
  EXPECT_GT(count_of(p2, "EACCES"), 0) << show(p2);
  EXPECT_GT(p1_total, 1000) << "too few connects overlapped the applies";
  std::cout << "100 applies under " << p1_total + p2_total << " connects: P1 " << show(p1) << ", P2 " << show(p2)
            << "\n";
}

}  // namespace
}  // namespace flenf
