// DNS: a real query for a blocked name (or any name under it) gets no answer,
// while other names, and names that merely end in the same letters, resolve.
#include "e2e_fixture.h"

namespace fle2e {
namespace {

class Dns : public E2eTest {
 protected:
  // 0 answered, 3 no answer in time: fl-testhost dns-query's exit codes.
  int query(const std::string& name) {
    auto r = testhost_on_a({"dns-query", kAddrB, name, "--timeout-ms", "400"});
    last_ = r.describe();
    return r.status.exited ? r.status.code : -1;
  }
  std::string last_;
};

TEST_P(Dns, BlocksTheNameAndItsSubdomainsOnly) {
  start_server({"dns-server", std::to_string(kDnsPort), "--quiet"});
  ASSERT_EQ(query("blocked.example"), 0) << "no baseline: the resolver does not answer: " << last_;

  ChildProcess run = start_run("dns", {"--domains", "blocked.example", "--target", kAddrB, "--duration", "4s"});
  ASSERT_TRUE(wait_started(run));
  EXPECT_EQ(query("blocked.example"), 3) << last_;
  EXPECT_EQ(query("www.Blocked.EXAMPLE"), 3) << "a subdomain, in any case: " << last_;
  EXPECT_EQ(query("allowed.example"), 0) << last_;
  EXPECT_NE(last_.find("198.18.0.99"), std::string::npos) << "the answer should carry the server's address: " << last_;
  EXPECT_EQ(query("notblocked.example"), 0) << "only whole labels match: " << last_;
  ASSERT_TRUE(run.running()) << run.describe();

  auto st = run.wait(10s);
  ASSERT_TRUE(st) << run.describe();
  EXPECT_TRUE(st->is(0)) << run.describe();
  auto ended = ended_event(run);
  ASSERT_TRUE(ended) << run.describe();
  EXPECT_EQ((*ended)["counters"]["dropped"], 2) << "one query each for the name and the subdomain: " << ended->dump();
  EXPECT_EQ(query("blocked.example"), 0) << "after the fault: " << last_;
}

FLE2E_ON_BOTH_ATTACH_PATHS(Dns);

}  // namespace
}  // namespace fle2e
