// The one storage suite, run against both backends: migrations, identity,
// workspace scoping, the experiment life cycle, the claim's at-most-once,
// the kill switch and the audit chain.
#include <gtest/gtest.h>

#include <thread>

#include "cp/audit/audit_chain.h"
#include "cp/storage/migrations.h"
#include "cp_env.h"

namespace {

using faultline::cp::Store;
using fltest::Backend;

class StorageTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    db_ = std::make_unique<fltest::TestDatabase>(GetParam());
    store_ = db_->open();
    ASSERT_NE(store_, nullptr);
  }
  // A workspace with one user and one agent: {workspace id, agent id}.
  std::pair<int64_t, int64_t> workspace_with_agent(const std::string& name) {
    auto u = store_->create_workspace(name, name + "@example.com", "scrypt$x", 1000);
    EXPECT_TRUE(u.ok()) << u.error().describe();
    faultline::cp::AgentFacts f{name + "-host", "6.1.0", "i-" + name, "eth0", "1.0", "{}"};
    auto a = store_->insert_agent(u->workspace_id, f, 1000);
    EXPECT_TRUE(a.ok()) << a.error().describe();
    return {u->workspace_id, a->id};
  }

  std::unique_ptr<fltest::TestDatabase> db_;
  std::unique_ptr<Store> store_;
};

TEST_P(StorageTest, MigrationsRunOnceAndAgainChangeNothing) {
  EXPECT_EQ(*store_->schema_version(), faultline::cp::latest_schema_version());
  auto [ws, agent] = workspace_with_agent("ws");
  store_.reset();
  auto again = db_->open();  // a restart
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(*again->schema_version(), faultline::cp::latest_schema_version());
  auto rows = again->sql().query("SELECT COUNT(*) FROM schema_migrations");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->at(0).at(0), std::to_string(faultline::cp::latest_schema_version()));
  auto kept = again->agent(ws, agent);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->has_value()) << "data survives a restart";
}

// A database made by an older faultcp (schema 1) is upgraded on start and
// keeps its rows; the new column takes its default.
TEST_P(StorageTest, AnOlderSchemaIsUpgradedKeepingItsData) {
  store_.reset();
  fltest::TestDatabase old_db(GetParam());
  auto conn = faultline::cp::open_database(old_db.url());
  ASSERT_TRUE(conn.ok()) << conn.error().describe();
  ASSERT_EQ(*faultline::cp::migrate(**conn, 1), 1);
  ASSERT_TRUE((*conn)->query("INSERT INTO workspaces (name, created_ms) VALUES ('old', 1)").ok());
  ASSERT_TRUE((*conn)
                  ->query("INSERT INTO agents (workspace_id, hostname, kernel, instance_id, device, version, "
                          "features, created_ms, last_seen_ms) VALUES (1, 'h', '', '', '', '', '{}', 1, 1)")
                  .ok());
  EXPECT_FALSE((*conn)->query("SELECT killed FROM agents").ok()) << "schema 1 has no agents.killed";
  conn->reset();
  auto upgraded = old_db.open();
  ASSERT_NE(upgraded, nullptr);
  EXPECT_EQ(*upgraded->schema_version(), faultline::cp::latest_schema_version());
  auto agent = upgraded->agent(1, 1);
  ASSERT_TRUE(agent.ok() && agent->has_value()) << (agent.ok() ? "gone" : agent.error().describe());
  EXPECT_EQ((*agent)->hostname, "h");
  EXPECT_FALSE((*agent)->killed);
}

TEST_P(StorageTest, SignupRefusesATakenWorkspaceOrEmail) {
  ASSERT_TRUE(store_->create_workspace("acme", "a@example.com", "h", 1).ok());
  auto same_name = store_->create_workspace("acme", "b@example.com", "h", 1);
  ASSERT_FALSE(same_name.ok());
  EXPECT_EQ(same_name.error().err, faultline::cp::kConflict);
  auto same_email = store_->create_workspace("other", "a@example.com", "h", 1);
  ASSERT_FALSE(same_email.ok());
  EXPECT_EQ(same_email.error().err, faultline::cp::kConflict);
  auto ws = store_->sql().query("SELECT COUNT(*) FROM workspaces");
  EXPECT_EQ(ws->at(0).at(0), "1") << "a refused signup stores nothing";
}

TEST_P(StorageTest, TokensAreFoundByHashAndRevokedOnlyInTheirWorkspace) {
  auto [a, agent_a] = workspace_with_agent("a");
  auto [b, agent_b] = workspace_with_agent("b");
  auto t = store_->insert_token(a, "api", "hash-1", "flcp_api_abc", "ci", std::nullopt, std::nullopt, 5);
  ASSERT_TRUE(t.ok()) << t.error().describe();
  auto found = store_->token_by_hash("hash-1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->workspace_id, a);
  EXPECT_EQ((*found)->kind, "api");
  EXPECT_FALSE((*found)->revoked_ms.has_value());
  EXPECT_FALSE(*store_->revoke_token(b, t->id, 6)) << "workspace b revoked a's token";
  EXPECT_TRUE(*store_->revoke_token(a, t->id, 7));
  EXPECT_FALSE(*store_->revoke_token(a, t->id, 8)) << "revoked twice";
  EXPECT_EQ((*store_->token_by_hash("hash-1"))->revoked_ms, 7);
  EXPECT_EQ(store_->tokens(b)->size(), 0u);
}

TEST_P(StorageTest, ObjectsOfAnotherWorkspaceAreNotFound) {
  auto [a, agent_a] = workspace_with_agent("a");
  auto [b, agent_b] = workspace_with_agent("b");
  auto e = store_->insert_experiment(a, agent_a, R"({"kind":"loss"})", 10);
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_FALSE(store_->agent(b, agent_a)->has_value());
  EXPECT_FALSE(store_->experiment(b, e->id)->has_value());
  EXPECT_TRUE(store_->experiments(b, 100)->empty());
  EXPECT_EQ(store_->agents(b)->size(), 1u);
  EXPECT_FALSE(store_->claim_next(b, agent_a, 11, 100)->has_value());
  EXPECT_FALSE(store_->transition(b, e->id, {"queued"}, "cancelled", "x", std::nullopt, 12)->has_value());
  EXPECT_EQ((*store_->experiment(a, e->id))->state, "queued") << "b's calls changed a's experiment";
}

// Policy versions are numbered per workspace; an agent's labels and policy
// report are kept, and scoped to its workspace.
TEST_P(StorageTest, PolicyVersionsPerWorkspaceAndAgentPolicyReports) {
  auto [a, agent_a] = workspace_with_agent("pa");
  auto [b, agent_b] = workspace_with_agent("pb");
  EXPECT_FALSE(store_->policy(a)->has_value());
  auto v1 = store_->insert_policy(a, "one", "{\"p\":1}", R"({"all":true})", 10, "user:1");
  ASSERT_TRUE(v1.ok()) << v1.error().describe();
  EXPECT_EQ(v1->version, 1);
  auto v2 = store_->insert_policy(a, "two", "{\"p\":2}", R"({"labels":{"role":"web"}})", 11, "user:1");
  ASSERT_TRUE(v2.ok()) << v2.error().describe();
  EXPECT_EQ(v2->version, 2);
  auto other = store_->insert_policy(b, "b", "{}", R"({"all":true})", 12, "user:2");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->version, 1) << "versions are per workspace";
  EXPECT_EQ((*store_->policy(a))->name, "two");
  EXPECT_EQ((*store_->policy(a, 1))->policy, "{\"p\":1}");
  EXPECT_FALSE(store_->policy(a, 3)->has_value());
  EXPECT_EQ((*store_->policy(b))->name, "b");

  faultline::cp::AgentFacts f{"web-1", "6.1.0", "i-w", "eth0", "1.0", "{}", R"({"role":"web"})"};
  auto labelled = store_->insert_agent(a, f, 20);
  ASSERT_TRUE(labelled.ok()) << labelled.error().describe();
  EXPECT_EQ((*store_->agent(a, labelled->id))->labels, R"({"role":"web"})");
  EXPECT_EQ((*store_->agent(a, agent_a))->labels, "{}");
  faultline::cp::PolicyReport r{2, 1, "failed", "no such cgroup"};
  EXPECT_TRUE(*store_->report_policy(a, labelled->id, r, 30));
  EXPECT_FALSE(*store_->report_policy(b, labelled->id, r, 30)) << "another workspace's agent";
  auto got = **store_->agent(a, labelled->id);
  EXPECT_EQ(got.policy_reported, 2);
  EXPECT_EQ(got.policy_version, 1);
  EXPECT_EQ(got.policy_status, "failed");
  EXPECT_EQ(got.policy_detail, "no such cgroup");
  EXPECT_EQ(got.policy_reported_ms, 30);
  EXPECT_FALSE((*store_->agent(b, agent_b))->policy_reported.has_value());
}

TEST_P(StorageTest, AnExperimentGoesThroughItsStates) {
  auto [ws, agent] = workspace_with_agent("w");
  auto e = store_->insert_experiment(ws, agent, R"({"kind":"latency","delay_ms":100})", 10);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->state, "queued");
  auto claimed = store_->claim_next(ws, agent, 20, 5020);
  ASSERT_TRUE(claimed.ok() && claimed->has_value());
  EXPECT_EQ((*claimed)->state, "dispatched");
  EXPECT_EQ((*claimed)->lease_until_ms, 5020);
  EXPECT_FALSE(store_->claim_next(ws, agent, 21, 5021)->has_value()) << "claimed twice";
  auto running = store_->transition(ws, e->id, {"dispatched"}, "running", "", std::nullopt, 30);
  ASSERT_TRUE(running.ok() && running->has_value());
  EXPECT_FALSE(store_->transition(ws, e->id, {"dispatched"}, "running", "", std::nullopt, 31)->has_value());
  auto done = store_->transition(ws, e->id, {"running"}, "completed", "", std::string(R"({"verdict":"held"})"), 40);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ((*done)->record, R"({"verdict":"held"})");
  EXPECT_FALSE((*done)->lease_until_ms.has_value());
  EXPECT_TRUE(faultline::cp::is_final_state((*done)->state));
  EXPECT_EQ((*store_->experiments_by_state(ws))["completed"], 1);
  EXPECT_TRUE(store_->experiments_by_state(ws + 1000)->empty());
}

// Two connections (two faultcp replicas, or two pollers) race for the same
// queued experiments: each is claimed by exactly one.
TEST_P(StorageTest, TwoClaimersNeverGetTheSameExperiment) {
  const auto ids = workspace_with_agent("w");  // not a structured binding: the lambda captures them
  const int64_t ws = ids.first, agent = ids.second;
  constexpr int kExperiments = 20;
  for (int i = 0; i < kExperiments; ++i) ASSERT_TRUE(store_->insert_experiment(ws, agent, "{}", i).ok());
  auto other = db_->open();
  ASSERT_NE(other, nullptr);
  std::vector<int64_t> got_a, got_b;
  auto claimer = [&](Store* s, std::vector<int64_t>* got) {
    for (int i = 0; i < kExperiments * 2; ++i) {
      auto c = s->claim_next(ws, agent, 100, 200);
      if (c.ok() && c->has_value()) got->push_back((*c)->id);
    }
  };
  std::thread ta(claimer, store_.get(), &got_a), tb(claimer, other.get(), &got_b);
  ta.join();
  tb.join();
  std::set<int64_t> all(got_a.begin(), got_a.end());
  for (auto id : got_b) EXPECT_TRUE(all.insert(id).second) << "experiment " << id << " claimed twice";
  EXPECT_EQ(all.size(), static_cast<size_t>(kExperiments));
}

TEST_P(StorageTest, TheKillSwitchCancelsEverythingAndBlocksClaimsUntilReleased) {
  auto [ws, agent] = workspace_with_agent("w");
  auto [other_ws, other_agent] = workspace_with_agent("other");
  auto running = store_->insert_experiment(ws, agent, "{}", 1);
  auto queued = store_->insert_experiment(ws, agent, "{}", 2);
  auto elsewhere = store_->insert_experiment(other_ws, other_agent, "{}", 3);
  ASSERT_TRUE(store_->claim_next(ws, agent, 4, 1000)->has_value());
  ASSERT_TRUE(store_->transition(ws, running->id, {"dispatched"}, "running", "", std::nullopt, 5)->has_value());
  auto cancelled = store_->engage_kill(ws, 6);
  ASSERT_TRUE(cancelled.ok()) << cancelled.error().describe();
  EXPECT_EQ(cancelled->size(), 2u);
  EXPECT_EQ((*store_->experiment(ws, running->id))->state, "cancelled");
  EXPECT_TRUE((*store_->experiment(ws, running->id))->stop_requested) << "the agent must be told to stop";
  EXPECT_FALSE((*store_->experiment(ws, queued->id))->stop_requested) << "never reached an agent";
  EXPECT_EQ(*store_->pending_stops(ws, agent), std::vector<int64_t>{running->id});
  EXPECT_EQ((*store_->experiment(other_ws, elsewhere->id))->state, "queued") << "another workspace was killed";
  EXPECT_TRUE((*store_->workspace(ws))->killed);
  auto late = store_->insert_experiment(ws, agent, "{}", 7);
  EXPECT_FALSE(store_->claim_next(ws, agent, 8, 1000)->has_value()) << "claimed while killed";
  EXPECT_TRUE(*store_->confirm_stop(ws, running->id, std::string("{}"), 9));
  EXPECT_TRUE(store_->pending_stops(ws, agent)->empty());
  ASSERT_TRUE(store_->release_kill(ws).ok());
  auto after = store_->claim_next(ws, agent, 10, 1000);
  ASSERT_TRUE(after->has_value());
  EXPECT_EQ((*after)->id, late->id);
}

TEST_P(StorageTest, AnAgentsKillSwitchStopsThatAgentOnly) {
  auto [ws, agent] = workspace_with_agent("w");
  auto second = store_->insert_agent(ws, {"h2", "", "", "", "", "{}"}, 1);
  ASSERT_TRUE(second.ok());
  auto mine = store_->insert_experiment(ws, agent, "{}", 2);
  auto theirs = store_->insert_experiment(ws, second->id, "{}", 3);
  auto cancelled = store_->engage_agent_kill(ws, agent, 4);
  ASSERT_TRUE(cancelled.ok() && cancelled->has_value()) << (cancelled.ok() ? "" : cancelled.error().describe());
  ASSERT_EQ((*cancelled)->size(), 1u);
  EXPECT_EQ((*cancelled)->at(0).id, mine->id);
  EXPECT_TRUE((*store_->agent(ws, agent))->killed);
  EXPECT_FALSE((*store_->workspace(ws))->killed);
  auto later = store_->insert_experiment(ws, agent, "{}", 5);
  EXPECT_FALSE(store_->claim_next(ws, agent, 6, 100)->has_value()) << "a killed agent was given work";
  EXPECT_EQ((*store_->claim_next(ws, second->id, 6, 100))->id, theirs->id);
  EXPECT_FALSE(store_->engage_agent_kill(ws + 1000, agent, 7)->has_value()) << "another workspace's agent";
  EXPECT_TRUE(*store_->release_agent_kill(ws, agent));
  EXPECT_EQ((*store_->claim_next(ws, agent, 8, 100))->id, later->id);
}

TEST_P(StorageTest, AnExpiredLeaseFailsTheExperimentAndNeverRequeuesIt) {
  auto [ws, agent] = workspace_with_agent("w");
  auto e = store_->insert_experiment(ws, agent, "{}", 1);
  ASSERT_TRUE(store_->claim_next(ws, agent, 2, 100)->has_value());
  EXPECT_TRUE(store_->expired_leases(99)->empty());
  auto expired = store_->expired_leases(101);
  ASSERT_EQ(expired->size(), 1u);
  EXPECT_FALSE(store_->expire_lease(ws, e->id, 99)->has_value()) << "failed before its lease ended";
  auto failed = store_->expire_lease(ws, e->id, 101);
  ASSERT_TRUE(failed.ok() && failed->has_value());
  EXPECT_EQ((*failed)->state, "failed");
  EXPECT_TRUE(store_->expired_leases(102)->empty());
  EXPECT_FALSE(store_->claim_next(ws, agent, 102, 200)->has_value()) << "dispatched a second time";
}

// A handler's change and its audit entry are one transaction; store calls
// that open their own join it, and a failure inside undoes all of it.
TEST_P(StorageTest, NestedTransactionsCommitOrRollBackAsOne) {
  auto [ws, agent] = workspace_with_agent("w");
  {
    faultline::cp::SqlTransaction tx(store_->sql());
    ASSERT_TRUE(store_->begin(tx, ws).ok());
    ASSERT_TRUE(store_->engage_kill(ws, 5).ok());  // opens (and commits) its own, nested
    ASSERT_TRUE(store_->append_audit(ws, "user:1", "kill.engage", "", "{}", 5).ok());
    // No commit: the scope's end rolls everything back.
  }
  EXPECT_FALSE((*store_->workspace(ws))->killed) << "an inner commit escaped the outer rollback";
  EXPECT_TRUE(store_->audit(ws)->empty());
  {
    faultline::cp::SqlTransaction tx(store_->sql());
    ASSERT_TRUE(store_->begin(tx, ws).ok());
    ASSERT_TRUE(store_->engage_kill(ws, 6).ok());
    ASSERT_TRUE(store_->append_audit(ws, "user:1", "kill.engage", "", "{}", 6).ok());
    ASSERT_TRUE(tx.commit().ok());
  }
  EXPECT_TRUE((*store_->workspace(ws))->killed);
  EXPECT_EQ(store_->audit(ws)->size(), 1u);
  {
    faultline::cp::SqlTransaction tx(store_->sql());
    ASSERT_TRUE(store_->begin(tx, ws).ok());
    ASSERT_TRUE(store_->release_kill(ws).ok());
    {
      faultline::cp::SqlTransaction inner(store_->sql());
      ASSERT_TRUE(inner.begin(1).ok());
    }  // an inner step gave up
    EXPECT_FALSE(tx.commit().ok()) << "committed although a step inside failed";
  }
  EXPECT_TRUE((*store_->workspace(ws))->killed);
}

TEST_P(StorageTest, TheAuditChainVerifiesAndAnEditedRowIsNamed) {
  auto [ws, agent] = workspace_with_agent("w");
  auto [other, other_agent] = workspace_with_agent("other");
  std::vector<faultline::cp::AuditEntry> appended;
  for (int i = 0; i < 4; ++i) {
    auto e = store_->append_audit(ws, "user:1", "experiment.create", "experiment:" + std::to_string(i),
                                  R"({"i":)" + std::to_string(i) + "}", 100 + i);
    ASSERT_TRUE(e.ok()) << e.error().describe();
    appended.push_back(*e);
    ASSERT_TRUE(store_->append_audit(other, "user:2", "x", "", "{}", 100 + i).ok());  // interleaved chains
  }
  auto chain = store_->audit(ws);
  ASSERT_EQ(chain->size(), 4u);
  EXPECT_EQ(chain->at(0).prev_hash, faultline::cp::kAuditGenesis);
  auto ok = faultline::cp::verify_audit_chain(*chain);
  EXPECT_TRUE(ok.ok) << ok.reason;
  EXPECT_EQ(ok.head, appended.back().hash);
  // Someone with the database edits the third entry.
  ASSERT_TRUE(store_->sql().query("UPDATE audit SET object = 'experiment:999' WHERE seq = $1", {appended[2].seq}).ok());
  auto bad = faultline::cp::verify_audit_chain(*store_->audit(ws));
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.bad_seq, appended[2].seq) << bad.reason;
  EXPECT_TRUE(faultline::cp::verify_audit_chain(*store_->audit(other)).ok);
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace
