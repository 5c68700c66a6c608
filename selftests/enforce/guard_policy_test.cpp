// faultctl guard: the allow/deny matrix, precedence, monitor vs enforce and
// --deny-errno, seen by fl_probe inside the guarded cgroup and, at the same
// moment, by the same probe outside it (which must be untouched).
//
// Every address of 198.18.0.0/15 and 2001:2::/48 is local in the test namespace
// and nothing listens, so an allowed TCP connect is refused by the stack
// (ECONNREFUSED) and an allowed UDP connect or sendto succeeds; a denied one gets
// the policy's errno (EPERM unless --deny-errno).
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "enforce_env.h"

namespace flenf {
namespace {

class GuardPolicyTest : public EnforceTest {};

struct Probe {
  std::vector<std::string> args;  // fl_probe action
  std::string label;              // its RESULT label
  std::string allowed;            // the outcome when nothing stands in the way
};

std::string ep(const std::string& addr, const std::string& port) {
  return addr.find(':') != std::string::npos ? "[" + addr + "]:" + port : addr + ":" + port;
}
Probe tcp(const std::string& a, const std::string& p) {
  return {{"connect", "tcp", a, p, "1"}, "tcp " + ep(a, p), "ECONNREFUSED"};
}
Probe udp(const std::string& a, const std::string& p) {
  return {{"connect", "udp", a, p, "1"}, "udp " + ep(a, p), "ok"};
}
Probe sendto(const std::string& a, const std::string& p) { return {{"sendto", a, p, "1"}, "sendto " + ep(a, p), "ok"}; }
// TCP Fast Open connects from sendto(), without a connect() call.
Probe fastopen(const std::string& a, const std::string& p) {
  return {{"fastopen", a, p, "1"}, "fastopen " + ep(a, p), "ECONNREFUSED"};
}

struct Expect {
  Probe probe;
  std::string inside;  // "allowed" or an errno name
};

struct GuardRun {
  CommandResult guard;
  std::map<std::string, Counts> inside, outside;
};

// faultctl guard FLAGS -- fl_probe --netns NS PROBES hold; while the guarded probe
// holds (so the policy is attached), the same probes from outside the cgroup.
GuardRun guard_and_outside(const std::vector<std::string>& flags, const Netns& ns, const std::vector<Expect>& ex) {
  std::vector<std::string> actions;
  for (const auto& e : ex) actions.insert(actions.end(), e.probe.args.begin(), e.probe.args.end());
  std::vector<std::string> argv = {kFaultctl, "guard"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"--", kProbe, "--netns", ns.name()});
  argv.insert(argv.end(), actions.begin(), actions.end());
  argv.push_back("hold");
  ChildProcess g = spawn(argv, {.stdin_pipe = true});
  GuardRun r;
  bool held = g.wait_for("HOLD", 20s);
  if (held) {
    std::vector<std::string> out = {kProbe, "--netns", ns.name()};
    out.insert(out.end(), actions.begin(), actions.end());
    CommandResult o = run(out, 20s);
    EXPECT_TRUE(o.status.is(0)) << o.describe();
    r.outside = results(o.out);
  }
  g.close_stdin();
  auto e = g.wait(20s);
  r.guard = {e.value_or(ExitStatus{}), g.out(), g.err(), ""};
  EXPECT_TRUE(held) << "the guarded probe never reached HOLD: " << g.describe();
  EXPECT_TRUE(e && e->is(0)) << g.describe();
  r.inside = results(g.out());
  return r;
}

struct Case {
  std::string name;
  std::vector<std::string> flags;
  std::vector<Expect> expect;
  friend void PrintTo(const Case& v, std::ostream* os) { *os << v.name; }
};

void check(const Case& c, const GuardRun& r) {
  for (const auto& e : c.expect) {
    const std::string want = e.inside == "allowed" ? e.probe.allowed : e.inside;
    auto in = r.inside.find(e.probe.label);
    ASSERT_NE(in, r.inside.end()) << "no result for " << e.probe.label << " inside\n" << r.guard.describe();
    EXPECT_EQ(show(in->second), want + ":1") << c.name << ": inside the guard, " << e.probe.label << "\n"
                                             << r.guard.describe();
    auto out = r.outside.find(e.probe.label);
    ASSERT_NE(out, r.outside.end()) << "no result for " << e.probe.label << " outside";
    EXPECT_EQ(show(out->second), e.probe.allowed + ":1") << c.name << ": outside the cgroup, " << e.probe.label;
  }
}

class GuardMatrix : public EnforceTest, public ::testing::WithParamInterface<Case> {};

TEST_P(GuardMatrix, InsideGetsThePolicyOutsideIsUntouched) {
  Netns ns(unique_name("m"), {.local_ranges = true});
  const Case& c = GetParam();
  GuardRun r = guard_and_outside(c.flags, ns, c.expect);
  check(c, r);
}

const char* A = "allowed";

INSTANTIATE_TEST_SUITE_P(
    Enforce, GuardMatrix,
    ::testing::Values(
        Case{"ipv4_address",
             {"--enforce", "--deny", "198.18.0.1"},
             {{tcp("198.18.0.1", "80"), "EPERM"},
              {tcp("198.18.0.2", "80"), A},
              {udp("198.18.0.1", "53"), "EPERM"},
              {sendto("198.18.0.1", "53"), "EPERM"},
              {sendto("198.18.0.2", "53"), A},
              {fastopen("198.18.0.1", "80"), "EPERM"},
              {fastopen("198.18.0.2", "80"), A}}},
        // An IPv6 socket reaching an IPv4 address (v4-mapped) meets the IPv4 rules.
        Case{"ipv4_rules_on_ipv6_sockets",
             {"--enforce", "--deny", "198.18.0.0/24:80"},
             {{tcp("::ffff:198.18.0.1", "80"), "EPERM"},
              {tcp("::ffff:198.18.0.1", "81"), A},
              {udp("::ffff:198.18.0.9", "80"), "EPERM"},
              {sendto("::ffff:198.18.0.9", "80"), "EPERM"},
              {fastopen("::ffff:198.18.0.2", "80"), "EPERM"},
              {tcp("::ffff:198.18.1.1", "80"), A}}},
        Case{"ipv4_cidr",
             {"--enforce", "--deny", "198.18.4.0/22", "--deny", "198.19.0.0/16"},
             {{tcp("198.18.4.1", "80"), "EPERM"},
              {tcp("198.18.7.255", "80"), "EPERM"},
              {tcp("198.18.8.0", "80"), A},
              {tcp("198.18.3.255", "80"), A},
              {tcp("198.19.200.1", "22"), "EPERM"},
              {sendto("198.18.5.5", "9"), "EPERM"}}},
        Case{"ports_and_ranges",
             {"--enforce", "--deny", "198.18.0.0/15:8000-8010", "--deny", "198.18.9.9:443"},
             {{tcp("198.18.1.1", "8000"), "EPERM"},
              {tcp("198.18.1.1", "8010"), "EPERM"},
              {tcp("198.18.1.1", "7999"), A},
              {tcp("198.18.1.1", "8011"), A},
              {sendto("198.19.1.1", "8005"), "EPERM"},
              {tcp("198.18.9.9", "443"), "EPERM"},
              {tcp("198.18.9.9", "444"), A},
              {tcp("198.18.9.8", "443"), A}}},
        Case{"protocol_suffixes",
             {"--enforce", "--deny", "198.18.0.1:53/udp", "--deny", "198.18.0.2:53/tcp", "--deny", "198.18.0.3/tcp"},
             {{sendto("198.18.0.1", "53"), "EPERM"},
              {udp("198.18.0.1", "53"), "EPERM"},
              {tcp("198.18.0.1", "53"), A},
              {tcp("198.18.0.2", "53"), "EPERM"},
              {sendto("198.18.0.2", "53"), A},
              {udp("198.18.0.2", "53"), A},
              {tcp("198.18.0.3", "1234"), "EPERM"},
              {udp("198.18.0.3", "1234"), A}}},
        Case{"ipv6",
             {"--enforce", "--deny", "[2001:2::1]:80", "--deny", "2001:2:0:1::/64", "--deny", "::1", "--deny",
              "[2001:2:0:3::/64]:443-444/tcp"},
             {{tcp("2001:2::1", "80"), "EPERM"},
              {tcp("2001:2::1", "81"), A},
              {tcp("2001:2::2", "80"), A},
              {tcp("2001:2:0:1::99", "5"), "EPERM"},
              {tcp("2001:2:0:2::1", "5"), A},
              {tcp("::1", "9"), "EPERM"},
              {udp("2001:2:0:1::5", "53"), "EPERM"},
              {sendto("2001:2:0:1::5", "53"), "EPERM"},
              {sendto("2001:2:0:2::5", "53"), A},
              {tcp("2001:2:0:3::1", "443"), "EPERM"},
              {tcp("2001:2:0:3::1", "445"), A},
              {udp("2001:2:0:3::1", "443"), A},
              {tcp("198.18.0.1", "80"), A}}},
        // Deny rules are asked first, even when an allow rule is more specific;
        // then allow; then the default (here deny, for IPv6 as for IPv4).
        Case{"deny_then_allow_then_default_deny",
             {"--enforce", "--default-deny", "--deny", "198.18.0.0/16", "--allow", "198.18.7.0/24", "--allow",
              "198.19.1.0/24"},
             {{tcp("198.18.7.1", "80"), "EPERM"},
              {tcp("198.19.1.1", "80"), A},
              {sendto("198.19.1.1", "53"), A},
              {tcp("198.19.2.1", "80"), "EPERM"},
              {sendto("198.19.2.1", "53"), "EPERM"},
              {tcp("2001:2::1", "80"), "EPERM"}}},
        Case{"deny_inside_allow_default_allow",
             {"--enforce", "--allow", "198.18.0.0/15", "--deny", "198.18.1.1"},
             {{tcp("198.18.1.1", "80"), "EPERM"}, {tcp("198.18.1.2", "80"), A}, {tcp("2001:2::5", "80"), A}}},
        Case{"default_deny_allows_one_port_and_protocol",
             {"--enforce", "--default-deny", "--allow", "198.18.0.0/15:80/tcp"},
             {{tcp("198.18.3.3", "80"), A},
              {tcp("198.18.3.3", "81"), "EPERM"},
              {udp("198.18.3.3", "80"), "EPERM"},
              {sendto("198.18.3.3", "80"), "EPERM"},
              {tcp("2001:2::3", "80"), "EPERM"}}},
        Case{"deny_errno",
             {"--enforce", "--deny-errno", "ENETUNREACH", "--deny", "198.18.0.1", "--deny", "2001:2::1"},
             {{tcp("198.18.0.1", "80"), "ENETUNREACH"},
              {sendto("198.18.0.1", "53"), "ENETUNREACH"},
              {tcp("2001:2::1", "80"), "ENETUNREACH"},
              {tcp("198.18.0.2", "80"), A}}},
        // Monitor mode (no --enforce) denies nothing.
        Case{"monitor_lets_everything_through",
             {"--default-deny", "--deny", "198.18.0.1"},
             {{tcp("198.18.0.1", "80"), A}, {sendto("198.18.0.1", "53"), A}, {tcp("2001:2::1", "80"), A}}}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Same probes, same rule: monitor reports each would-be deny, enforce denies;
// each names the rule, and the summary counts the attempts.
TEST_F(GuardPolicyTest, MonitorReportsWouldDenyEnforceDenies) {
  Netns ns(unique_name("mon"), {.local_ranges = true});
  const std::vector<Expect> ex = {{tcp("198.18.0.1", "80"), ""},
                                  {udp("198.18.0.1", "53"), ""},
                                  {sendto("198.18.0.1", "53"), ""},
                                  {tcp("198.18.0.2", "80"), ""}};
  GuardRun mon = guard_and_outside({"--deny", "198.18.0.1"}, ns, ex);
  EXPECT_EQ(show(mon.inside["tcp 198.18.0.1:80"]), "ECONNREFUSED:1") << mon.guard.describe();
  EXPECT_EQ(show(mon.inside["sendto 198.18.0.1:53"]), "ok:1") << mon.guard.describe();
  EXPECT_NE(mon.guard.err.find("connect 198.18.0.1:80/tcp -> would-deny (--deny 198.18.0.1)"), std::string::npos)
      << mon.guard.describe();
  EXPECT_NE(mon.guard.err.find("sendmsg 198.18.0.1:53/udp -> would-deny (--deny 198.18.0.1)"), std::string::npos)
      << mon.guard.describe();
  EXPECT_NE(mon.guard.err.find("connect 198.18.0.2:80/tcp -> allow (default allow)"), std::string::npos)
      << mon.guard.describe();
  EXPECT_EQ(mon.guard.err.find("-> deny"), std::string::npos) << "monitor mode must deny nothing\n"
                                                              << mon.guard.describe();
  EXPECT_NE(mon.guard.err.find("summary (monitor, default allow)"), std::string::npos) << mon.guard.describe();
  EXPECT_NE(mon.guard.err.find("would have been denied: 3 attempts"), std::string::npos) << mon.guard.describe();

  GuardRun enf = guard_and_outside({"--enforce", "--deny", "198.18.0.1"}, ns, ex);
  EXPECT_EQ(show(enf.inside["tcp 198.18.0.1:80"]), "EPERM:1") << enf.guard.describe();
  EXPECT_NE(enf.guard.err.find("connect 198.18.0.1:80/tcp -> deny (--deny 198.18.0.1)"), std::string::npos)
      << enf.guard.describe();
  EXPECT_EQ(enf.guard.err.find("would-deny"), std::string::npos) << enf.guard.describe();
  EXPECT_NE(enf.guard.err.find("summary (enforce, default allow)"), std::string::npos) << enf.guard.describe();
  EXPECT_NE(enf.guard.err.find("denied: 3 attempts"), std::string::npos) << enf.guard.describe();
  for (const auto& [label, c] : enf.outside) EXPECT_EQ(count_of(c, "EPERM"), 0) << "outside: " << label;
}

// --policy FILE: the egress section of a policy file as the guard's policy. The
// file's rules, ports lists, default, errno and mode decide exactly as the
// same rules given as flags would; reports name the rules of the file.
TEST_F(GuardPolicyTest, PolicyFileIsTheGuardsPolicy) {
  Netns ns(unique_name("pf"), {.local_ranges = true});
  const std::string file = "/tmp/" + unique_name("policy") + ".yaml";
  {
    std::ofstream f(file);
    f << "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: guard-file}\nspec:\n  egress:\n"
         "    - all: true\n      mode: enforce\n      default_allow: false\n      deny_errno: EACCES\n"
         "      rules:\n"
         "        - {name: web, action: allow, cidr: 198.18.0.0/24, ports: [80, 8000-8001], proto: tcp}\n"
         "        - {name: dns, action: allow, cidr: 198.18.0.53, ports: [53], proto: udp}\n"
         "        - {name: not-this-one, action: deny, cidr: 198.18.0.9}\n";
  }
  const std::vector<Expect> ex = {{tcp("198.18.0.2", "80"), A},          {tcp("198.18.0.2", "8001"), A},
                                  {tcp("198.18.0.2", "8002"), "EACCES"}, {tcp("198.18.0.9", "80"), "EACCES"},
                                  {udp("198.18.0.53", "53"), A},         {sendto("198.18.0.2", "53"), "EACCES"},
                                  {tcp("2001:2::1", "80"), "EACCES"}};
  GuardRun r = guard_and_outside({"--policy", file}, ns, ex);
  ::unlink(file.c_str());
  check(Case{"policy_file", {}, ex}, r);
  EXPECT_NE(r.guard.err.find("connect 198.18.0.2:80/tcp -> allow (rule web (ports 80): allow, policy guard-file)"),
            std::string::npos)
      << r.guard.describe();
  EXPECT_NE(r.guard.err.find("connect 198.18.0.9:80/tcp -> deny (rule not-this-one: deny, policy guard-file)"),
            std::string::npos)
      << r.guard.describe();
  EXPECT_NE(r.guard.err.find("summary (enforce, default deny)"), std::string::npos) << r.guard.describe();
  EXPECT_NE(r.guard.err.find("    rule web (ports 8000-8001): allow, policy guard-file  1\n"), std::string::npos)
      << r.guard.describe();
}

}  // namespace
}  // namespace flenf
