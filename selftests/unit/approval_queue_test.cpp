// The guard's approval queue: each hold settles exactly once, by a decision,
// the timeout, a withdrawal (proxied requests only) or the guard stopping;
// and the "always allow" grants of --approve-dangerous.
#include "userspace/guard/approval_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "userspace/guard/exec_grants.h"

namespace faultline {
namespace {

using namespace std::chrono_literals;

struct Settled {
  std::mutex mu;
  std::vector<std::pair<ApprovalOutcome, std::string>> seen;
  ApprovalSettle settle() {
    return [this](ApprovalOutcome o, const std::string& why) {
      std::lock_guard lock(mu);
      seen.emplace_back(o, why);
    };
  }
  size_t count() {
    std::lock_guard lock(mu);
    return seen.size();
  }
};

PendingApproval request(uint64_t request_id) {
  PendingApproval p;
  p.request_id = request_id;
  p.method = "POST";
  p.host = "api.example:443";
  p.path = "/v1/prod/deploy";
  return p;
}

PendingApproval exec_hold() {
  PendingApproval p;
  p.subject = ApprovalSubject::Exec;
  p.method = "EXEC";
  p.path = "rm -rf /tmp/x";
  return p;
}

TEST(ApprovalQueue, ADecisionSettlesOnceAndNamesTheHold) {
  ApprovalQueue q("77", 60s);
  Settled s;
  const std::string id = q.add(request(5), s.settle());
  EXPECT_EQ(id, "77.1");
  ASSERT_EQ(q.list().size(), 1u);
  auto decided = q.decide(id, true, "looks fine");
  ASSERT_TRUE(decided) << decided.error().describe();
  EXPECT_EQ(decided->path, "/v1/prod/deploy");
  ASSERT_EQ(s.count(), 1u);
  EXPECT_EQ(s.seen[0].first, ApprovalOutcome::Approved);
  EXPECT_EQ(s.seen[0].second, "looks fine");
  EXPECT_TRUE(q.list().empty());
  auto again = q.decide(id, false, "");
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().describe().find("no request 77.1"), std::string::npos) << again.error().describe();
  EXPECT_EQ(s.count(), 1u);
}

TEST(ApprovalQueue, AWithdrawalNamesOnlyProxiedRequests) {
  ApprovalQueue q("78", 60s);
  Settled req, exe;
  const std::string held_exec = q.add(exec_hold(), exe.settle());
  (void)q.add(request(1), req.settle());
  // An exec hold has no request id of the proxy's: the request's withdrawal,
  // whatever its number, leaves the exec waiting.
  EXPECT_FALSE(q.withdraw(0));
  EXPECT_TRUE(q.withdraw(1));
  EXPECT_FALSE(q.withdraw(1));
  ASSERT_EQ(req.count(), 1u);
  EXPECT_EQ(req.seen[0].first, ApprovalOutcome::Withdrawn);
  EXPECT_EQ(exe.count(), 0u);
  auto left = q.list();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id, held_exec);
  EXPECT_EQ(left[0].subject, ApprovalSubject::Exec);
  ASSERT_TRUE(q.decide(held_exec, false, "no"));
  ASSERT_EQ(exe.count(), 1u);
  EXPECT_EQ(exe.seen[0].first, ApprovalOutcome::Denied);
}

TEST(ApprovalQueue, TheTimeoutDeniesAndStoppingSettlesWhatIsLeft) {
  Settled early, late;
  {
    ApprovalQueue q("79", 50ms);
    (void)q.add(request(2), early.settle());
    for (int i = 0; i < 400 && early.count() == 0; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(early.count(), 1u) << "the 50 ms hold was not timed out in 4 s";
    EXPECT_EQ(early.seen[0].first, ApprovalOutcome::TimedOut);
  }
  {
    ApprovalQueue q("80", 3600s);
    (void)q.add(exec_hold(), late.settle());
  }
  ASSERT_EQ(late.count(), 1u);
  EXPECT_EQ(late.seen[0].first, ApprovalOutcome::TimedOut);
  EXPECT_EQ(late.seen[0].second, "the guard stopped");
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

TEST(ExecGrants, AGrantNamesOneCommandLineAndIsRevoked) {
  ExecGrants g("81");
  const std::string a = g.add("/usr/bin/rm -rf /tmp/build", "rm-recursive-force");
  EXPECT_EQ(a, "81.g1");
  EXPECT_EQ(g.add("/usr/bin/rm -rf /tmp/build", "rm-recursive-force"), a) << "granting again is the same grant";
  EXPECT_TRUE(g.find("/usr/bin/rm -rf /tmp/build"));
  EXPECT_FALSE(g.find("/usr/bin/rm -rf /tmp/build2")) << "a grant is the exact command line, not its rule";
  EXPECT_FALSE(g.find("/usr/bin/rm -rf /tmp"));
  const std::string b = g.add("/usr/bin/git push --force", "git-push-force");
  EXPECT_EQ(b, "81.g2");
  ASSERT_EQ(g.list().size(), 2u);
  EXPECT_EQ(g.list()[0].id, a);
  EXPECT_FALSE(g.revoke("81.g9"));
  EXPECT_TRUE(g.revoke(a));
  EXPECT_FALSE(g.find("/usr/bin/rm -rf /tmp/build"));
  EXPECT_EQ(g.revoke_all(), 1u);
  EXPECT_TRUE(g.list().empty());
  EXPECT_EQ(g.add("/usr/bin/rm -rf /tmp/build", "rm-recursive-force"), "81.g3") << "ids are never reused";
}

}  // namespace
}  // namespace faultline
