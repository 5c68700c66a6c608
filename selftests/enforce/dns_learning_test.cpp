// Host rules of an applied policy against a real resolver: in a throw-away
// network namespace, dnsmasq resolves (forwarding, no cache) for an
// authoritative stand-in (a second dnsmasq with --host-record, TTL 0); a
// client in a test cgroup under the policy asks for a name and connects to
// the answer at once, 1000 times, with the learned addresses emptied before
// every lookup: each first connect after a lookup is decided by what the
// kernel learned from that very answer.
#include <bpf/bpf.h>

#include <chrono>
#include <fstream>

#include "enforce_env.h"
#include "loader/applied_policy.h"

namespace flenf {
namespace {

using DnsLearningApplyTest = PolicyFileTest;

std::string scope_pin_key(const std::string& cgroup) {
  std::string k = "cg";
  for (char c : cgroup) k += c == '/' ? std::string("%2F") : c == '%' ? std::string("%25") : std::string(1, c);
  return k;
}

TEST_F(DnsLearningApplyTest, FirstConnectAfterEachLookupIsDecidedByTheLearnedAddress) {
  if (::access("/usr/sbin/dnsmasq", X_OK) != 0) GTEST_SKIP() << "dnsmasq is not installed (Debian dnsmasq-base)";
  const std::string u = unique_name("d");
  const std::string ok = "ok." + u + ".test", bad = "bad." + u + ".test";
  Netns ns(unique_name("dns"));
  for (const char* a : {"10.253.0.1/32", "10.253.0.2/32", "10.253.0.11/32", "10.254.0.10/32"})
    ip({"-n", ns.name(), "addr", "add", a, "dev", "lo"});
  const std::vector<std::string> dnsmasq = {"ip",
                                            "netns",
                                            "exec",
                                            ns.name(),
                                            "/usr/sbin/dnsmasq",
                                            "-k",
                                            "--conf-file=/dev/null",
                                            "--no-resolv",
                                            "--no-hosts",
                                            "--bind-interfaces",
                                            "--pid-file=",
                                            "--log-facility=/dev/null"};
  auto auth_argv = dnsmasq;
  auth_argv.insert(auth_argv.end(), {"--listen-address=10.253.0.2", "--local-ttl=0",
                                     "--host-record=" + ok + ",10.254.0.10", "--host-record=" + bad + ",10.253.0.11"});
  auto resolver_argv = dnsmasq;
  resolver_argv.insert(resolver_argv.end(),
                       {"--listen-address=10.253.0.1", "--server=10.253.0.2", "--cache-size=0", "--no-negcache"});
  ChildProcess auth = spawn(auth_argv);
  ChildProcess resolver = spawn(resolver_argv);
  ChildProcess web = spawn({"ip", "netns", "exec", ns.name(), kPython, "-c",
                            "import socket\n"
                            "s = socket.socket()\n"
                            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                            "s.bind(('10.254.0.10', 80))\n"
                            "s.listen(4096)\n"
                            "while True:\n"
                            "    c, _ = s.accept()\n"
                            "    c.close()\n"});
  // Ready: the resolver answers and the web server accepts (no policy yet).
  bool ready = false;
  for (int i = 0; i < 50 && !ready; ++i) {
    auto probe = run({kProbe, "--netns", ns.name(), "resolveconnect", "10.253.0.1", "80", "1", "-", ok});
    ready = count_of(results(probe.out)["connect " + ok], "ok") == 1;
    if (!ready) ::usleep(100000);
  }
  ASSERT_TRUE(ready) << "dnsmasq or the web server did not come up";

  TestCgroup cg(unique_name("dns"));
  const std::string policy =
      "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: dns-race\nspec:\n  egress:\n"
      "    - cgroup: " +
      cg.relative() +
      "\n"
      "      mode: enforce\n      default_allow: false\n      dns_ttl_min: 5s\n      dns_ttl_max: 10m\n"
      "      rules:\n"
      "        - {name: resolver, action: allow, cidr: 10.253.0.1, ports: [53], proto: udp}\n"
      "        - {name: lan, action: allow, cidr: 10.253.0.0/24}\n"
      "        - {name: web, action: allow, host: " +
      ok +
      ", ports: [80], proto: tcp}\n"
      "        - {name: blocked, action: deny, host: " +
      bad + "}\n";
  auto applied = run({kFaultctl, "policy", "apply", file(policy)});
  ASSERT_TRUE(applied.status.is(0)) << applied.describe();
  auto exported = run({kFaultctl, "policy", "export", "--format", "yaml"});
  EXPECT_NE(exported.out.find("host: \"" + ok + "\""), std::string::npos) << exported.out;
  EXPECT_NE(exported.out.find("dns_ttl_min: \"5s\""), std::string::npos) << exported.out;

  const std::string learned_pin = bpffs_root_ + "/policy/scopes/" + scope_pin_key(cg.relative()) + "/fl_dns_learn";
  const auto t0 = std::chrono::steady_clock::now();
  auto race = run({kProbe, "--netns", ns.name(), "resolveconnect", "10.253.0.1", "80", "1000", learned_pin, ok, bad},
                  60s, {.cgroup = cg.path()});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto r = results(race.out);
  std::cout << "dns race: 1000 rounds in " << secs << " s; " << ok << " " << show(r["connect " + ok]) << "; " << bad
            << " " << show(r["connect " + bad]) << "\n";
  EXPECT_EQ(count_of(r["resolve " + ok], "ok"), 1000) << race.describe();
  EXPECT_EQ(count_of(r["resolve " + bad], "ok"), 1000) << race.describe();
  // Allowed only by the host rule (the default denies 10.254.0.10): each one
  // needed the address learned from the answer just read.
  EXPECT_EQ(count_of(r["connect " + ok], "ok"), 1000) << race.describe();
  // 10.253.0.11 is in the `lan` allow; only the learned host deny refuses it
  // (unlearned, it would reach the namespace and be refused: ECONNREFUSED).
  EXPECT_EQ(count_of(r["connect " + bad], "EPERM"), 1000) << race.describe();

  auto status = run({kFaultctl, "status"});
  EXPECT_NE(status.out.find("host rules: "), std::string::npos) << status.describe();
  EXPECT_NE(status.out.find("malformed 0"), std::string::npos) << status.describe();
  for (size_t at = status.out.find("host rules: "); at != std::string::npos; at = std::string::npos)
    std::cout << "status: " << status.out.substr(at, status.out.find('\n', at) - at) << "\n";

  // The control: with nothing learned, the allowed host is denied (the
  // default) and the denied one is reached (the `lan` allow, no listener):
  // every answer above was the learned address at work.
  int learned = bpf_obj_get(learned_pin.c_str());
  ASSERT_GE(learned, 0) << learned_pin;
  fl_addr k{};
  while (bpf_map_get_next_key(learned, nullptr, &k) == 0) ASSERT_EQ(bpf_map_delete_elem(learned, &k), 0);
  ::close(learned);
  auto control = run({kProbe, "--netns", ns.name(), "connect", "tcp", "10.254.0.10", "80", "3", "connect", "tcp",
                      "10.253.0.11", "80", "3"},
                     30s, {.cgroup = cg.path()});
  auto c = results(control.out);
  EXPECT_EQ(count_of(c["tcp 10.254.0.10:80"], "EPERM"), 3) << control.describe();
  EXPECT_EQ(count_of(c["tcp 10.253.0.11:80"], "ECONNREFUSED"), 3) << control.describe();
}

// Entries in a pinned learned-addresses map, expired or not.
size_t learned_entries(const std::string& pin) {
  int fd = bpf_obj_get(pin.c_str());
  if (fd < 0) return 0;
  size_t n = 0;
  fl_addr k{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    ++n;
    k = next;
    prev = &k;
  }
  ::close(fd);
  return n;
}

// Seeding and expiry: apply resolves an exact name (localhost, from
// /etc/hosts) so the first connect needs no DNS answer; once the clamp's
// 2 s have passed the address decides nothing (the connect that finds it
// expired deletes it), and an apply reaps the expired ones.
TEST_F(DnsLearningApplyTest, ApplySeedsExactNamesAndExpiredAddressesDecideNothing) {
  TestCgroup cg(unique_name("dnss"));
  TcpServer srv;
  const std::string port = std::to_string(srv.port());
  auto policy = [&](const std::string& host) {
    return "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: dns-seed\nspec:\n  egress:\n"
           "    - cgroup: " +
           cg.relative() +
           "\n"
           "      mode: enforce\n      default_allow: false\n      dns_ttl_min: 2s\n      dns_ttl_max: 2s\n"
           "      rules:\n"
           "        - {name: local, action: allow, host: " +
           host + ", ports: [" + port + "], proto: tcp}\n";
  };
  auto applied = run({kFaultctl, "policy", "apply", file(policy("localhost"))});
  ASSERT_TRUE(applied.status.is(0)) << applied.describe();
  const std::string label = "tcp 127.0.0.1:" + port;
  auto seeded = run({kProbe, "connect", "tcp", "127.0.0.1", port, "2"}, 30s, {.cgroup = cg.path()});
  EXPECT_EQ(count_of(results(seeded.out)[label], "ok"), 2) << seeded.describe();
  const std::string pin = bpffs_root_ + "/policy/scopes/" + scope_pin_key(cg.relative()) + "/fl_dns_learn";
  EXPECT_GE(learned_entries(pin), 1u);

  ::usleep(2'500'000);
  auto expired = run({kProbe, "connect", "tcp", "127.0.0.1", port, "2"}, 30s, {.cgroup = cg.path()});
  EXPECT_EQ(count_of(results(expired.out)[label], "EPERM"), 2) << expired.describe();
  auto status = run({kFaultctl, "status"});
  EXPECT_NE(status.out.find("host rules: 0 learned addresses"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("expired 1"), std::string::npos) << status.out;

  // Whatever else was seeded (::1) has expired too: the next apply (a name
  // that seeds nothing) reaps it.
  auto again = run({kFaultctl, "policy", "apply", file(policy("nothing.invalid"))});
  ASSERT_TRUE(again.status.is(0)) << again.describe();
  EXPECT_EQ(learned_entries(pin), 0u);
}

}  // namespace
}  // namespace flenf
