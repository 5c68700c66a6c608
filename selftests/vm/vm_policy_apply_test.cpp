// faultctl policy apply on each kernel of the matrix: the sockaddr object in
// its generations mode (array-of-maps of LPM tries and of counters, the shared
// generation map) passes that verifier, a host-wide scope denies a
// documentation address only (the guest has no route there anyway), a second
// apply flips the errno, and delete lifts it.
#include <gtest/gtest.h>

#include "vm_util.h"

namespace flvm {
namespace {

std::string host_deny(const std::string& errno_name) {
  return "apiVersion: faultline.dev/v1\nkind: Policy\nmetadata: {name: vm-" + errno_name +
         "}\nspec:\n  egress:\n    - all: true\n      mode: enforce\n      deny_errno: " + errno_name +
         "\n      rules:\n        - {name: testnet, action: deny, cidr: 192.0.2.99, ports: [80], proto: tcp}\n";
}

TEST(PolicyApply, HostWideScopeFlipsGenerationsAndIsDeleted) {
  write_file("/tmp/policy-a.yaml", host_deny("EACCES"));
  write_file("/tmp/policy-b.yaml", host_deny("ECONNREFUSED"));
  auto a = run({bin("faultctl"), "policy", "apply", "/tmp/policy-a.yaml"});
  ASSERT_EQ(a.status.code, 0) << a.out;
  EXPECT_EQ(run({bin("fl-vmprobe"), "peer", "tcp", "192.0.2.99", "80"}).out, "error EACCES\n");
  auto b = run({bin("faultctl"), "policy", "apply", "/tmp/policy-b.yaml"});
  ASSERT_EQ(b.status.code, 0) << b.out;
  EXPECT_EQ(run({bin("fl-vmprobe"), "peer", "tcp", "192.0.2.99", "80"}).out, "error ECONNREFUSED\n");
  auto d = run({bin("faultctl"), "policy", "delete"});
  EXPECT_EQ(d.status.code, 0) << d.out;
  auto after = run({bin("fl-vmprobe"), "peer", "tcp", "192.0.2.99", "80"}).out;
  EXPECT_NE(after, "error ECONNREFUSED\n");
  EXPECT_NE(after, "error EACCES\n");
}

}  // namespace
}  // namespace flvm
