// Bad flags of faultctl guard, run syscall and top: one line on stderr that names
// the flag, exit 2, and nothing created (no cgroup, the command never ran).
#include <sys/stat.h>

#include <algorithm>

#include "enforce_env.h"
#include "selftests/lib/require_root.h"

namespace flenf {
namespace {

struct BadInput {
  std::string name;
  std::vector<std::string> args;  // after faultctl; "MARK" is replaced by a marker path
  std::string names;              // what the one line must contain
  bool root = false;              // checked against the system, after faultctl's root check
  friend void PrintTo(const BadInput& v, std::ostream* os) { *os << v.name; }
};

// Flags are checked before anything else, root or not: these run without root too.
class BadInputs : public EnforceTest, public ::testing::WithParamInterface<BadInput> {
 protected:
  void SetUp() override { forget_faultctl_pids(); }
};

TEST_P(BadInputs, OneLineNamingTheFlagExitTwoNothingCreated) {
  const BadInput& b = GetParam();
  if (b.root) FL_REQUIRE_ROOT("cgroups and BPF programs");
  const std::string marker = "/tmp/" + unique_name("ran");
  std::vector<std::string> argv = {kFaultctl};
  for (const auto& a : b.args) argv.push_back(a == "MARK" ? marker : a);
  CommandResult r = run(argv, 20s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_EQ(r.out, "") << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "expected exactly one line\n" << r.describe();
  EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << r.describe();
  EXPECT_NE(r.err.find(b.names), std::string::npos) << "the line should name " << b.names << "\n" << r.describe();
  struct stat st {};
  EXPECT_NE(::stat(marker.c_str(), &st), 0) << "the command ran despite bad flags";
  ::unlink(marker.c_str());
  // The fixture fails the test if a faultline-*-<pid> cgroup of this faultctl is left.
}

std::vector<std::string> guard(std::vector<std::string> flags) {
  std::vector<std::string> v = {"guard"};
  v.insert(v.end(), flags.begin(), flags.end());
  v.insert(v.end(), {"--", "touch", "MARK"});
  return v;
}

std::vector<std::string> sys(std::vector<std::string> flags, bool command = true) {
  std::vector<std::string> v = {"run", "syscall"};
  v.insert(v.end(), flags.begin(), flags.end());
  if (command) v.insert(v.end(), {"--", "touch", "MARK"});
  return v;
}

std::vector<std::string> nine_overlapping_denies() {
  std::vector<std::string> f = {"--enforce"};
  for (int i = 0; i < 9; ++i) f.insert(f.end(), {"--deny", "10.0.0.0/8:" + std::to_string(1000 + i)});
  return guard(f);
}

std::vector<std::string> nine_overlapping_redirects() {
  std::vector<std::string> f;
  for (int i = 0; i < 9; ++i)
    f.insert(f.end(), {"--redirect", "10.0.0.0/8:" + std::to_string(1000 + i) + "=127.0.0.1:80"});
  return guard(f);
}

const std::vector<std::string> kOk = {"--errno", "EIO", "--duration", "5s"};
std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

INSTANTIATE_TEST_SUITE_P(
    Enforce, BadInputs,
    ::testing::Values(
        // faultctl guard
        BadInput{"guard_bad_ipv4", guard({"--enforce", "--deny", "300.1.1.1"}), "--deny 300.1.1.1"},
        BadInput{"guard_policy_missing_file", guard({"--policy", "/nonexistent/policy.yaml"}),
                 "--policy /nonexistent/policy.yaml: cannot read"},
        BadInput{"guard_policy_and_flags",
                 guard({"--policy", FAULTLINE_SOURCE_DIR "/docs/examples/policy/guard-egress.yaml", "--enforce"}),
                 "--enforce comes from the policy file"},
        BadInput{"guard_policy_with_experiments",
                 guard({"--policy", FAULTLINE_SOURCE_DIR "/docs/examples/policy/web-egress.yaml"}),
                 "spec.faults: the guard applies the egress section only"},
        BadInput{
            "guard_policy_invalid",
            guard({"--policy", FAULTLINE_SOURCE_DIR "/selftests/fuzz/corpus/policy_parse/rule_host_wildcard_middle"}),
            "rule_host_wildcard_middle:10:42: spec.egress[0].rules[0].host: 'api.*.example.com'"},
        BadInput{"guard_prefix_too_long", guard({"--allow", "10.0.0.0/33"}), "--allow 10.0.0.0/33"},
        BadInput{"guard_ipv6_prefix_too_long", guard({"--deny", "2001:db8::/129"}), "--deny 2001:db8::/129"},
        BadInput{"guard_port_too_big", guard({"--deny", "10.0.0.1:70000"}), "--deny 10.0.0.1:70000"},
        BadInput{"guard_port_range_reversed", guard({"--deny", "10.0.0.1:9000-8000"}), "--deny 10.0.0.1:9000-8000"},
        // A host name is a rule of the request guard now (docs/guard.md); a bad one is refused.
        BadInput{"guard_host_name", guard({"--deny", "ex*ample.com"}), "--deny 'ex*ample.com'"},
        BadInput{"guard_unclosed_ipv6", guard({"--deny", "[2001:db8::1:443"}), "--deny [2001:db8::1:443"},
        BadInput{"guard_bad_protocol", guard({"--deny", "10.0.0.1:53/sctp"}), "--deny 10.0.0.1:53/sctp"},
        BadInput{"guard_empty_port", guard({"--allow", "10.0.0.1:"}), "--allow 10.0.0.1:"},
        BadInput{"guard_redirect_no_target", guard({"--redirect", "10.0.0.1:80"}),
                 "--redirect 10.0.0.1:80: expected DEST=TARGET"},
        BadInput{"guard_redirect_empty_dest", guard({"--redirect", "=127.0.0.1:80"}),
                 "the destination before '=' is missing"},
        BadInput{"guard_redirect_empty_target", guard({"--redirect", "10.0.0.1="}), "the target after '=' is missing"},
        BadInput{"guard_redirect_bad_dest", guard({"--redirect", "300.1.1.1:80=127.0.0.1:80"}),
                 "--redirect 300.1.1.1:80=127.0.0.1:80: destination 300.1.1.1:80"},
        BadInput{"guard_redirect_dest_port_too_big", guard({"--redirect", "10.0.0.1:70000=127.0.0.1:80"}),
                 "ports are 1-65535"},
        BadInput{"guard_redirect_target_no_port", guard({"--redirect", "10.0.0.1=127.0.0.1"}),
                 "target 127.0.0.1: the port is missing"},
        BadInput{"guard_redirect_target_empty_port", guard({"--redirect", "10.0.0.1=127.0.0.1:"}),
                 "the port after ':' is missing"},
        BadInput{"guard_redirect_target_port_zero", guard({"--redirect", "10.0.0.1=127.0.0.1:0"}),
                 "target 127.0.0.1:0: '0': ports are 1-65535"},
        BadInput{"guard_redirect_target_range", guard({"--redirect", "10.0.0.1=127.0.0.1:80-90"}),
                 "one port, not a range"},
        BadInput{"guard_redirect_target_cidr", guard({"--redirect", "10.0.0.1=127.0.0.0/8:80"}),
                 "one address, not a CIDR"},
        BadInput{"guard_redirect_target_host_name", guard({"--redirect", "10.0.0.1=localhost:80"}),
                 "target localhost:80"},
        BadInput{"guard_redirect_target_unspecified", guard({"--redirect", "10.0.0.1=0.0.0.0:80"}),
                 "the unspecified address is not a target"},
        BadInput{"guard_redirect_target_ipv6_unbracketed", guard({"--redirect", "[2001:db8::1]:80=::1:8080"}),
                 "write an IPv6 target as [ADDR]:PORT"},
        BadInput{"guard_redirect_target_unclosed", guard({"--redirect", "[2001:db8::1]:80=[::1:8080"}),
                 "unclosed [IPv6]"},
        BadInput{"guard_redirect_v4_to_v6", guard({"--redirect", "10.0.0.1:80=[::1]:8080"}),
                 "the destination is IPv4 and the target IPv6 (a redirect keeps the address family)"},
        BadInput{"guard_redirect_v6_to_v4", guard({"--redirect", "[2001:db8::1]:80=127.0.0.1:8080"}),
                 "the destination is IPv6 and the target IPv4"},
        BadInput{"guard_too_many_overlapping_redirects", nine_overlapping_redirects(),
                 "redirect rules overlap on 10.0.0.0/8"},
        BadInput{"guard_bad_deny_errno", guard({"--deny-errno", "EWHATEVER"}), "--deny-errno"},
        BadInput{"guard_zero_exfil_cap", guard({"--exfil-cap", "0"}), "--exfil-cap"},
        BadInput{"guard_bad_exfil_cap", guard({"--exfil-cap", "lots"}), "--exfil-cap"},
        BadInput{"guard_empty_json_log", guard({"--json-log", ""}), "--json-log"},
        BadInput{"guard_unknown_flag", guard({"--enforce", "--bogus"}), "bogus"},
        BadInput{"guard_flag_without_value", std::vector<std::string>{"guard", "--deny"}, "deny"},
        BadInput{"guard_no_command", std::vector<std::string>{"guard", "--enforce"}, "-- COMMAND"},
        BadInput{"guard_too_many_overlapping_rules", nine_overlapping_denies(), "deny rules overlap on 10.0.0.0/8"},
        BadInput{"guard_empty_netns", guard({"--netns", ""}), "--netns: empty name"},
        BadInput{"guard_missing_netns", guard({"--netns", "flenf-no-such-netns"}),
                 "--netns flenf-no-such-netns: no network namespace at /run/netns/flenf-no-such-netns", true},
        BadInput{"guard_netns_pid_not_a_number", guard({"--netns", "pid:abc"}),
                 "--netns pid:abc: pid:N needs a numeric pid", true},
        BadInput{"guard_netns_missing_pid", guard({"--netns", "pid:99999999"}),
                 "--netns pid:99999999: no network namespace at /proc/99999999/ns/net", true},
        BadInput{"guard_netns_name_with_slash", guard({"--netns", "a/b"}), "--netns a/b: a name may not contain '/'",
                 true},
        BadInput{"guard_netns_not_a_namespace", guard({"--netns", "/tmp"}),
                 "--netns /tmp: /tmp is not a namespace file", true},
        BadInput{"guard_netns_mount_namespace", guard({"--netns", "/proc/self/ns/mnt"}),
                 "--netns /proc/self/ns/mnt: /proc/self/ns/mnt is a namespace file, but not of a network namespace",
                 true},
        // faultctl run syscall
        BadInput{"syscall_unknown_syscall", sys(with({"--syscall", "nosuchcall"}, kOk)), "--syscall nosuchcall"},
        BadInput{"syscall_never_returns", sys(with({"--syscall", "exit_group"}, kOk)), "--syscall exit_group"},
        BadInput{"syscall_missing_syscall", sys(kOk), "--syscall"},
        BadInput{"syscall_unknown_errno", sys({"--syscall", "openat", "--errno", "EFOO", "--duration", "5s"}),
                 "--errno EFOO"},
        BadInput{"syscall_missing_errno", sys({"--syscall", "openat", "--duration", "5s"}), "--errno"},
        BadInput{"syscall_percent_over_100", sys(with({"--syscall", "openat", "--percent", "150"}, kOk)), "--percent"},
        BadInput{"syscall_percent_not_a_number", sys(with({"--syscall", "openat", "--percent", "half"}, kOk)),
                 "--percent"},
        BadInput{"syscall_duration_over_cap", sys({"--syscall", "openat", "--errno", "EIO", "--duration", "2h"}),
                 "--duration"},
        BadInput{"syscall_duration_too_short", sys({"--syscall", "openat", "--errno", "EIO", "--duration", "10ms"}),
                 "--duration"},
        BadInput{"syscall_missing_duration", sys({"--syscall", "openat", "--errno", "EIO"}), "--duration"},
        // The guardrail durations: the range of their row, in the words faultcp and faultd use for the same
        // value as an experiment's field (selftests/unit/experiment_fields_test.cpp).
        BadInput{"syscall_guardrail_interval_over_cap",
                 sys(with({"--syscall", "openat", "--health-url", "http://127.0.0.1:9/", "--interval", "11m"}, kOk)),
                 "--interval '11m': must be within 100ms-10m"},
        BadInput{
            "syscall_guardrail_health_max_latency_under_floor",
            sys(with({"--syscall", "openat", "--health-url", "http://127.0.0.1:9/", "--health-max-latency", "500us"},
                     kOk)),
            "--health-max-latency '500us': must be within 1ms-60s"},
        BadInput{"syscall_guardrail_steady_state_under_floor",
                 sys(with({"--syscall", "openat", "--health-url", "http://127.0.0.1:9/", "--hypothesis", "holds",
                           "--record", "MARK", "--steady-state", "500ms"},
                          kOk)),
                 "--steady-state '500ms': must be within 1s-10m"},
        BadInput{"syscall_no_scope", sys(with({"--syscall", "connect"}, kOk), false), "--cgroup PATH, --pid PID"},
        BadInput{"syscall_two_scopes", sys(with({"--syscall", "connect", "--pid", "4242"}, kOk)), "exactly one scope"},
        BadInput{"syscall_pid_one", sys(with({"--syscall", "connect", "--pid", "1"}, kOk), false), "--pid 1"},
        BadInput{"syscall_pid_not_a_number", sys(with({"--syscall", "connect", "--pid", "abc"}, kOk), false),
                 "--pid abc"},
        BadInput{"syscall_missing_pid", sys(with({"--syscall", "connect", "--pid", "99999999"}, kOk), false),
                 "--pid 99999999", true},
        BadInput{"syscall_missing_cgroup",
                 sys(with({"--syscall", "connect", "--cgroup", "flenf-no-such-cgroup"}, kOk), false),
                 "--cgroup flenf-no-such-cgroup", true},
        BadInput{"syscall_unknown_flag", sys(with({"--syscall", "openat", "--bogus"}, kOk)), "bogus"},
        BadInput{"syscall_relative_path", sys(with({"--syscall", "openat", "--path", "tmp/data"}, kOk)),
                 "--path tmp/data: not absolute"},
        BadInput{"syscall_empty_path", sys(with({"--syscall", "openat", "--path", ""}, kOk)),
                 "--path: an empty prefix"},
        BadInput{"syscall_path_with_connect", sys(with({"--syscall", "connect", "--path", "/tmp/"}, kOk)),
                 "--path cannot apply to --syscall connect: a socket syscall names no path"},
        BadInput{"syscall_path_with_read", sys(with({"--syscall", "openat,read", "--path", "/tmp/"}, kOk)),
                 "--path cannot apply to --syscall read: it takes no path"},
        BadInput{"syscall_path_via_cgroup",
                 sys(with({"--syscall", "openat", "--path", "/tmp/", "--via", "cgroup"}, kOk)),
                 "--via cgroup cannot take --path", true},
        BadInput{"syscall_path_via_lsm", sys(with({"--syscall", "openat", "--path", "/tmp/", "--via", "lsm"}, kOk)),
                 "--via lsm cannot take --path: the BPF LSM rung does not compare paths", true},
        BadInput{"syscall_path_without_command",
                 sys(with({"--syscall", "openat", "--path", "/tmp/", "--pid", "4242"}, kOk), false),
                 "--path needs a command to wrap", true},
        // faultctl top
        BadInput{"top_interval_too_short", std::vector<std::string>{"top", "--interval", "5ms"}, "--interval 5ms"},
        BadInput{"top_interval_not_a_duration", std::vector<std::string>{"top", "--interval", "soon"},
                 "--interval soon"},
        BadInput{"top_interval_without_value", std::vector<std::string>{"top", "--once", "--interval"}, "--interval"},
        BadInput{"top_missing_cgroup", std::vector<std::string>{"top", "--once", "--cgroup", "flenf-no-such-cgroup"},
                 "--cgroup flenf-no-such-cgroup", true},
        BadInput{"top_empty_cgroup", std::vector<std::string>{"top", "--cgroup", ""}, "--cgroup"},
        BadInput{"top_unknown_flag", std::vector<std::string>{"top", "--bogus"}, "'--bogus'"}),
    [](const ::testing::TestParamInfo<BadInput>& i) { return i.param.name; });

}  // namespace
}  // namespace flenf
