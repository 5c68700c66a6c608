// PgSession fed the bytes of the PostgreSQL v3 protocol each way: startup,
// SASL's -PLUS removal, cancel keys, judged Q and P, denials rewritten into
// 42501, holds, and the FATAL 08P01 of bad input. (End to end with a real
// server and psql: selftests/guard/guard_pg_test.cpp.)
#include "userspace/guard/pg_session.h"

#include <gtest/gtest.h>

namespace faultline {
namespace {

std::string be32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }

std::string startup(const std::string& user, const std::string& db) {
  std::string body = be32(196608) + "user" + '\0' + user + '\0' + "database" + '\0' + db + '\0' + '\0';
  return be32(uint32_t(body.size() + 4)) + body;
}

std::string query(const std::string& sql) { return pg_message('Q', sql + '\0'); }

std::string parse(const std::string& name, const std::string& sql) {
  return pg_message('P', name + '\0' + sql + '\0' + std::string(2, '\0'));
}

// The M field of an ErrorResponse, and its C.
std::pair<std::string, std::string> error_fields(const std::string& msg) {
  std::string m, c;
  size_t at = 5;
  while (at < msg.size() && msg[at] != '\0') {
    const char code = msg[at];
    const size_t end = msg.find('\0', at + 1);
    const std::string v = msg.substr(at + 1, end - at - 1);
    if (code == 'M') m = v;
    if (code == 'C') c = v;
    at = end + 1;
  }
  return {c, m};
}

struct Fixture {
  std::shared_ptr<const GuardPolicy> policy;
  std::shared_ptr<PgCancelKeys> keys = std::make_shared<PgCancelKeys>();
  std::unique_ptr<PgSession> session;

  explicit Fixture(GuardMode mode, size_t max_message = 1 << 20) {
    GuardPolicy p;
    p.mode = mode;
    GuardRule drop;
    drop.name = "no-drop";
    drop.action = GuardVerdict::Deny;
    drop.reason = "tables stay";
    drop.sql_verb = "DROP";
    GuardRule del;
    del.name = "ask-delete";
    del.action = GuardVerdict::Approve;
    del.sql_verb = "DELETE";
    p.rules = {drop, del};
    policy = std::make_shared<const GuardPolicy>(std::move(p));
    PgSessionOptions o;
    o.policy = [this] { return policy; };
    o.cancel_keys = keys;
    o.max_message = max_message;
    session = std::make_unique<PgSession>(std::move(o));
  }
  void ready() {
    PgOutput out = session->from_client(startup("alice", "shop"));
    ASSERT_EQ(out.to_server, startup("alice", "shop"));
    ASSERT_EQ(session->database(), "shop");
  }
};

TEST(PgSession, SslAndGssRequestsGetNThenStartupPasses) {
  Fixture f(GuardMode::Enforce);
  PgOutput out = f.session->from_client(be32(8) + be32(80877104));
  EXPECT_EQ(out.to_client, "N");
  out = f.session->from_client(be32(8) + be32(80877103));
  EXPECT_EQ(out.to_client, "N");
  EXPECT_TRUE(out.to_server.empty());
  // The startup in two pieces.
  const std::string s = startup("alice", "shop");
  out = f.session->from_client(s.substr(0, 7));
  EXPECT_TRUE(out.to_server.empty());
  out = f.session->from_client(s.substr(7));
  EXPECT_EQ(out.to_server, s);
  EXPECT_EQ(f.session->user(), "alice");
}

TEST(PgSession, SaslPlusMechanismsRemovedAndPasswordsPass) {
  Fixture f(GuardMode::Enforce);
  f.ready();
  const std::string sasl = pg_message('R', be32(10) + "SCRAM-SHA-256-PLUS" + '\0' + "SCRAM-SHA-256" + '\0' + '\0');
  PgOutput out = f.session->from_server(sasl);
  EXPECT_EQ(out.to_client, pg_message('R', be32(10) + "SCRAM-SHA-256" + '\0' + '\0'));
  const std::string initial = pg_message('p', std::string("SCRAM-SHA-256") + '\0' + be32(3) + "n,,");
  out = f.session->from_client(initial);
  EXPECT_EQ(out.to_server, initial);
  EXPECT_TRUE(out.judged.empty());
}

TEST(PgSession, BackendKeySwappedAndCancelMapped) {
  Fixture f(GuardMode::Enforce);
  f.ready();
  PgOutput out = f.session->from_server(pg_message('K', be32(4242) + be32(0x11223344)));
  ASSERT_EQ(out.to_client.size(), 13u);
  const std::string gate_secret = out.to_client.substr(9, 4);
  EXPECT_EQ(out.to_client.substr(5, 4), be32(4242));
  // A cancel on a new connection with the gate's key goes upstream with the server's.
  PgSessionOptions o;
  o.policy = [&f] { return f.policy; };
  o.cancel_keys = f.keys;
  PgSession cancel(std::move(o));
  out = cancel.from_client(be32(16) + be32(80877102) + be32(4242) + gate_secret);
  EXPECT_EQ(out.to_server, be32(16) + be32(80877102) + be32(4242) + be32(0x11223344));
  EXPECT_TRUE(out.close);
  // A key the gate never gave: dropped.
  PgSessionOptions o2;
  o2.policy = [&f] { return f.policy; };
  o2.cancel_keys = f.keys;
  PgSession wrong(std::move(o2));
  out = wrong.from_client(be32(16) + be32(80877102) + be32(4242) + be32(0x11223344 ^ 1));
  EXPECT_TRUE(out.to_server.empty());
  EXPECT_TRUE(out.close);
}

TEST(PgSession, DeniedQueryReplacedAndItsErrorBecomes42501) {
  Fixture f(GuardMode::Enforce);
  f.ready();
  PgOutput out = f.session->from_client(query("BEGIN"));
  EXPECT_EQ(out.to_server, query("BEGIN"));
  out = f.session->from_client(query("SELECT 1; DROP TABLE t"));
  ASSERT_EQ(out.judged.size(), 1u);
  EXPECT_EQ(out.judged[0].action, PgJudged::Action::Denied);
  EXPECT_EQ(out.judged[0].decision.rule, "no-drop");
  ASSERT_EQ(out.judged[0].statements.size(), 2u);
  EXPECT_EQ(out.judged[0].statements[1].tables, std::vector<std::string>{"t"});
  ASSERT_EQ(out.to_server[0], 'Q');
  const std::string sent = out.to_server.substr(5, out.to_server.size() - 6);
  EXPECT_EQ(sent.find("DROP"), std::string::npos);
  ASSERT_EQ(sent.rfind("faultline_denied_", 0), 0u) << sent;
  // The server's syntax error about it, then ReadyForQuery in a failed transaction.
  const std::string server_error = pg_error_response("ERROR", "42601", "syntax error at or near \"" + sent + "\"");
  const std::string rfq = pg_message('Z', "E");
  out = f.session->from_server(server_error + rfq);
  ASSERT_GT(out.to_client.size(), rfq.size());
  const std::string client_error = out.to_client.substr(0, out.to_client.size() - rfq.size());
  auto [code, message] = error_fields(client_error);
  EXPECT_EQ(code, "42501");
  EXPECT_EQ(message, "blocked by faultline: no-drop: tables stay");
  EXPECT_EQ(out.to_client.substr(client_error.size()), rfq);
  // Another error passes as the server sent it.
  const std::string other = pg_error_response("ERROR", "25P02", "current transaction is aborted");
  EXPECT_EQ(f.session->from_server(other).to_client, other);
}

TEST(PgSession, DeniedParseKeepsItsNameAndFails) {
  Fixture f(GuardMode::Enforce);
  f.ready();
  const std::string bind_exec_sync = pg_message('B', std::string(8, '\0')) + pg_message('S', "");
  PgOutput out = f.session->from_client(parse("s1", "DROP TABLE t") + bind_exec_sync);
  ASSERT_EQ(out.judged.size(), 1u);
  EXPECT_EQ(out.judged[0].type, 'P');
  ASSERT_EQ(out.to_server[0], 'P');
  EXPECT_EQ(out.to_server.substr(5, 3), std::string("s1") + '\0');
  EXPECT_NE(out.to_server.find("faultline_denied_"), std::string::npos);
  EXPECT_EQ(out.to_server.find("DROP"), std::string::npos);
  EXPECT_NE(out.to_server.find(bind_exec_sync), std::string::npos);  // the rest passes; the server skips it
}

TEST(PgSession, MonitorPassesWhatItWouldDeny) {
  Fixture f(GuardMode::Monitor);
  f.ready();
  PgOutput out = f.session->from_client(query("DROP TABLE t"));
  EXPECT_EQ(out.to_server, query("DROP TABLE t"));
  ASSERT_EQ(out.judged.size(), 1u);
  EXPECT_EQ(out.judged[0].action, PgJudged::Action::Forwarded);
  EXPECT_EQ(out.judged[0].decision.verdict, GuardVerdict::Deny);
  EXPECT_FALSE(out.judged[0].decision.enforced);
}

TEST(PgSession, FixedDenialsDoCopyProgramUnparseable) {
  Fixture f(GuardMode::Enforce);
  f.ready();
  for (auto [sql, rule] : {std::pair<const char*, std::string_view>{"DO $$BEGIN END$$", kPgRuleDo},
                           {"COPY t TO PROGRAM 'id'", kPgRuleCopyProgram},
                           {"SELEC 1", kPgRuleUnparseable}}) {
    PgOutput out = f.session->from_client(query(sql));
    ASSERT_EQ(out.judged.size(), 1u) << sql;
    EXPECT_EQ(out.judged[0].action, PgJudged::Action::Denied) << sql;
    EXPECT_EQ(out.judged[0].decision.rule, rule);
  }
}

TEST(PgSession, ApproveHoldsTheMessageAndWhatFollows) {
  Fixture f(GuardMode::Enforce);
  f.ready();
  PgOutput out = f.session->from_client(query("DELETE FROM t") + query("SELECT 2"));
  ASSERT_TRUE(out.held);
  EXPECT_EQ(out.held->decision.rule, "ask-delete");
  EXPECT_TRUE(out.to_server.empty());
  EXPECT_TRUE(f.session->holding());
  out = f.session->from_client(query("SELECT 3"));
  EXPECT_TRUE(out.to_server.empty());
  out = f.session->settle(true, "");
  EXPECT_EQ(out.to_server, query("DELETE FROM t") + query("SELECT 2") + query("SELECT 3"));
  EXPECT_FALSE(f.session->holding());
  // Denied by a person: the replacement goes instead.
  out = f.session->from_client(query("DELETE FROM t"));
  ASSERT_TRUE(out.held);
  out = f.session->settle(false, "denied by a person: not now");
  ASSERT_EQ(out.judged.size(), 1u);
  EXPECT_EQ(out.judged[0].action, PgJudged::Action::Denied);
  EXPECT_NE(out.to_server.find("faultline_denied_"), std::string::npos);
}

TEST(PgSession, BadInputIsFatal08P01) {
  {
    Fixture f(GuardMode::Enforce);
    PgOutput out = f.session->from_client(be32(4) + be32(196608));
    EXPECT_TRUE(out.close);
    EXPECT_EQ(error_fields(out.to_client).first, "08P01");
    EXPECT_TRUE(f.session->from_client(query("SELECT 1")).to_server.empty());  // nothing after
  }
  {
    Fixture f(GuardMode::Enforce);
    PgOutput out = f.session->from_client(be32(8) + be32(0x00020000));  // protocol 2.0
    EXPECT_TRUE(out.close);
    EXPECT_NE(error_fields(out.to_client).second.find("unsupported frontend protocol"), std::string::npos);
  }
  {
    Fixture f(GuardMode::Enforce, 64);
    f.ready();
    PgOutput out = f.session->from_client(query(std::string(100, 'x')).substr(0, 10));
    EXPECT_TRUE(out.close);
    auto [code, message] = error_fields(out.to_client);
    EXPECT_EQ(code, "08P01");
    EXPECT_NE(message.find("over the gate's limit of 64"), std::string::npos) << message;
    EXPECT_TRUE(out.to_server.empty());
  }
  {
    Fixture f(GuardMode::Enforce);
    f.ready();
    PgOutput out = f.session->from_client(std::string("Q") + be32(2));
    EXPECT_TRUE(out.close);
    EXPECT_EQ(error_fields(out.to_client).first, "08P01");
  }
}

}  // namespace
}  // namespace faultline
