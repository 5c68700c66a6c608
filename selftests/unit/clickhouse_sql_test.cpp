// ClickHouse SQL read for the guard's facts (the tokenizer), where an HTTP
// request carries it (?query=, then the body), how the SQL rules judge its
// statements beside the HTTP decision, and the ClickHouse denial text.
#include "userspace/guard/clickhouse_sql.h"

#include <gtest/gtest.h>

#include "userspace/guard/guard_answer.h"
#include "userspace/guard/guard_policy.h"

namespace faultline {
namespace {

using Names = std::vector<std::string>;

struct ChCase {
  const char* sql;
  std::vector<Names> verbs;  // per statement
  std::vector<Names> tables;
  std::vector<Names> functions;
};

TEST(ClickHouseSql, VerbsTablesAndFunctionsPerStatement) {
  const std::vector<ChCase> cases = {
      {"DROP TABLE default.t", {{"DROP"}}, {{"default.t"}}, {{}}},
      {"drop table if exists `odd name`", {{"DROP"}}, {{"odd name"}}, {{}}},
      {"DROP DATABASE prod", {{"DROP"}}, {{"prod.*"}}, {{}}},
      {"TRUNCATE TABLE IF EXISTS db.t ON CLUSTER c", {{"TRUNCATE"}}, {{"db.t"}}, {{}}},
      {"ALTER TABLE t ON CLUSTER c DELETE WHERE x = 1", {{"ALTER", "DELETE"}}, {{"t"}}, {{}}},
      {"ALTER TABLE t UPDATE a = 1, b = 2 WHERE id IN (SELECT id FROM s)", {{"ALTER", "UPDATE"}}, {{"t", "s"}}, {{}}},
      {"ALTER TABLE t DROP PARTITION 201901, ADD COLUMN c String", {{"ALTER", "DROP", "ADD"}}, {{"t"}}, {{}}},
      {"INSERT INTO t (a, b) VALUES (1, 'x')", {{"INSERT"}}, {{"t"}}, {{}}},
      {"INSERT INTO db.t FORMAT TSV\n1\t'unterminated", {{"INSERT"}}, {{"db.t"}}, {{}}},
      {"INSERT INTO t SELECT * FROM url('http://x/', CSV, 'a String')", {{"INSERT", "SELECT"}}, {{"t"}}, {{"url"}}},
      {"INSERT INTO FUNCTION file('out.tsv', TSV, 'a String') VALUES ('x')", {{"INSERT"}}, {{}}, {{"file"}}},
      {"SELECT a, count() FROM db.t1 AS x, t2 JOIN t3 ON x.id = t3.id ARRAY JOIN arr "
       "WHERE EXTRACT(DAY FROM d) = 1 AND id IN (SELECT id FROM t4) FORMAT JSON",
       {{"SELECT"}},
       {{"db.t1", "t2", "t3", "t4"}},
       {{"count", "EXTRACT"}}},
      {"WITH x AS (SELECT 1) SELECT * FROM x", {{"SELECT"}}, {{"x"}}, {{}}},
      {"(SELECT 1) UNION ALL (SELECT * FROM t)", {{"SELECT"}}, {{"t"}}, {{}}},
      {"CREATE TABLE t (a String, d DateTime64(3)) ENGINE = URL('http://x/', CSV)", {{"CREATE"}}, {{"t"}}, {{"URL"}}},
      {"CREATE MATERIALIZED VIEW mv TO dst AS SELECT a AS b FROM src", {{"CREATE"}}, {{"mv", "dst", "src"}}, {{}}},
      {"CREATE TABLE c AS src", {{"CREATE"}}, {{"c", "src"}}, {{}}},
      {"RENAME TABLE a TO b, db.c TO db.d", {{"RENAME"}}, {{"a", "b", "db.c", "db.d"}}, {{}}},
      {"OPTIMIZE TABLE t FINAL", {{"OPTIMIZE"}}, {{"t"}}, {{}}},
      {"SYSTEM DROP DNS CACHE", {{"SYSTEM"}}, {{}}, {{}}},
      {"KILL QUERY WHERE query_id = 'q'", {{"KILL"}}, {{}}, {{}}},
      {"SET max_threads = 1", {{"SET"}}, {{}}, {{}}},
      {"SHOW CREATE TABLE t", {{"SHOW"}}, {{"t"}}, {{}}},
      {"DESC t", {{"DESCRIBE"}}, {{"t"}}, {{}}},
      {"select sleep(3)", {{"SELECT"}}, {{}}, {{"sleep"}}},
      // Statements split at ';' outside strings and comments.
      {"SELECT 'a;b' -- c;\n; /* ; */ TRUNCATE t", {{"SELECT"}, {"TRUNCATE"}}, {{}, {"t"}}, {{}, {}}},
  };
  for (const ChCase& c : cases) {
    const ClickHouseSqlFacts f = clickhouse_sql_facts(c.sql, true);
    ASSERT_TRUE(f.facts.parsed) << c.sql << ": " << f.facts.error;
    ASSERT_EQ(f.facts.statements.size(), c.verbs.size()) << c.sql;
    for (size_t i = 0; i < c.verbs.size(); ++i) {
      EXPECT_EQ(f.facts.statements[i].verbs, c.verbs[i]) << c.sql;
      EXPECT_EQ(f.facts.statements[i].tables, c.tables[i]) << c.sql;
      EXPECT_EQ(f.facts.statements[i].functions, c.functions[i]) << c.sql;
    }
  }
}

TEST(ClickHouseSql, InsertDataEndsTheReading) {
  EXPECT_TRUE(clickhouse_sql_facts("INSERT INTO t VALUES", false).data_begun);
  EXPECT_TRUE(clickhouse_sql_facts("INSERT INTO t FORMAT CSV\n\"a", false).data_begun);
  // The data of an INSERT is never read as SQL: a ';' in it starts nothing.
  const auto f = clickhouse_sql_facts("INSERT INTO t FORMAT TSV\nx; DROP TABLE t", true);
  ASSERT_TRUE(f.facts.parsed);
  EXPECT_EQ(f.facts.statements.size(), 1u);
  // INSERT ... SELECT has no data: a cut one is unknown.
  EXPECT_FALSE(clickhouse_sql_facts("INSERT INTO t SELECT 1", false).facts.parsed);
}

TEST(ClickHouseSql, UnreadableSqlSaysWhy) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"SELECT 'abc\\' FROM t", "an unterminated string at position 8"},
      {"SELECT `x", "an unterminated quoted name"},
      {"SELECT 1 /* x", "an unterminated comment"},
      {"GRANT ALL ON *.* TO x", "a statement of a kind the guard does not read: GRANT"},
      {"DROP TABLE", "DROP without the name of what it acts on"},
      {"SELECT (1", "an unclosed '('"},
      {"1 + 1", "does not begin with a keyword"},
  };
  for (const auto& [sql, why] : cases) {
    const ClickHouseSqlFacts f = clickhouse_sql_facts(sql, true);
    EXPECT_FALSE(f.facts.parsed) << sql;
    EXPECT_NE(f.facts.error.find(why), std::string::npos) << sql << ": " << f.facts.error;
    EXPECT_TRUE(f.facts.statements.empty()) << sql;
  }
  // Cut (not whole): a statement open at the end is unknown, and so is what
  // may follow a complete one.
  for (const char* sql : {"SELECT * FROM t", "SELECT 1;", "DROP TABLE t"}) {
    const ClickHouseSqlFacts f = clickhouse_sql_facts(sql, false);
    EXPECT_FALSE(f.facts.parsed) << sql;
    EXPECT_NE(f.facts.error.find("64 KiB"), std::string::npos) << f.facts.error;
  }
}

TEST(ClickHouseRequestSql, QueryParameterThenBody) {
  // The query parameter decoded ('+' a space), then a newline, then the body.
  ClickHouseRequestSql get("/?database=default&query=DROP+TABLE%20t", false);
  EXPECT_FALSE(get.settled());
  SqlFacts f = get.facts(true);
  ASSERT_TRUE(f.parsed) << f.error;
  EXPECT_EQ(f.statements.at(0).verbs, Names{"DROP"});
  EXPECT_EQ(f.statements.at(0).tables, Names{"t"});

  // INSERT ... FORMAT in the URL: settled at the head, the body is data.
  ClickHouseRequestSql insert("/?query=INSERT%20INTO%20big%20FORMAT%20TSV", false);
  EXPECT_TRUE(insert.settled());
  f = insert.facts(false);
  ASSERT_TRUE(f.parsed) << f.error;
  EXPECT_EQ(f.statements.at(0).tables, Names{"big"});

  // The SQL in the body: settled once the INSERT's data begins.
  ClickHouseRequestSql body("/", false);
  EXPECT_FALSE(body.feed("INSERT INTO big FO"));
  EXPECT_TRUE(body.feed("RMAT TSV\nrow\n"));
  EXPECT_EQ(body.facts(false).statements.at(0).verbs, Names{"INSERT"});

  // The query parameter and the body are one text.
  ClickHouseRequestSql split("/?query=SELECT%20*", false);
  (void)split.feed(" FROM secrets");
  f = split.facts(true);
  ASSERT_TRUE(f.parsed) << f.error;
  EXPECT_EQ(f.statements.at(0).tables, Names{"secrets"});

  // A body longer than 64 KiB without INSERT data: settled at the cap, unknown.
  ClickHouseRequestSql big("/", false);
  const std::string filler = "SELECT '" + std::string(kClickHouseSqlBodyBytes, 'a') + "'";
  EXPECT_TRUE(big.feed(filler));
  EXPECT_FALSE(big.facts(true).parsed);

  // A compressed body, a malformed escape: unknown.
  ClickHouseRequestSql gz("/", true);
  EXPECT_TRUE(gz.feed("\x1f\x8b..."));
  EXPECT_NE(gz.facts(true).error.find("compressed"), std::string::npos);
  ClickHouseRequestSql dec("/?decompress=1&query=INSERT%20INTO%20t%20FORMAT%20Native", false);
  EXPECT_TRUE(dec.facts(false).parsed);  // the compressed body is the data
  ClickHouseRequestSql bad("/?query=DROP%zzTABLE", false);
  EXPECT_TRUE(bad.settled());
  EXPECT_NE(bad.facts(true).error.find("percent"), std::string::npos);
}

GuardRule sql_rule(const char* name, GuardVerdict action, const char* verb, const char* table = "") {
  GuardRule r;
  r.name = name;
  r.action = action;
  r.sql_verb = verb;
  r.sql_table = table;
  return r;
}

TEST(ClickHouseSql, StatementsJudgedBesideTheHttpDecision) {
  GuardPolicy p;
  p.mode = GuardMode::Enforce;
  p.rules = {sql_rule("no-drop", GuardVerdict::Deny, "DROP"),
             sql_rule("hold-truncate", GuardVerdict::Approve, "TRUNCATE")};
  const GuardDecision allowed{GuardVerdict::Allow, "", "no rule matched: allowed by default", true, false};

  GuardDecision d = decide_sql_request(p, clickhouse_sql_facts("SELECT 1; DROP TABLE db.t", true).facts, allowed);
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, "no-drop");
  EXPECT_EQ(d.reason, "a DROP statement on db.t");

  d = decide_sql_request(p, clickhouse_sql_facts("TRUNCATE t", true).facts, allowed);
  EXPECT_EQ(d.verdict, GuardVerdict::Approve);
  EXPECT_EQ(d.rule, "hold-truncate");

  d = decide_sql_request(p, clickhouse_sql_facts("SELECT * FROM t", true).facts, allowed);
  EXPECT_EQ(d.verdict, GuardVerdict::Allow);

  // The HTTP decision stands when it is the stricter.
  const GuardDecision http_deny{GuardVerdict::Deny, "--deny 127.0.0.1", "", true, false};
  d = decide_sql_request(p, clickhouse_sql_facts("TRUNCATE t", true).facts, http_deny);
  EXPECT_EQ(d.rule, "--deny 127.0.0.1");

  // Unreadable SQL is denied, with its reason.
  d = decide_sql_request(p, clickhouse_sql_facts("GRANT x", true).facts, allowed);
  EXPECT_EQ(d.verdict, GuardVerdict::Deny);
  EXPECT_EQ(d.rule, kSqlRuleUnparseable);
  EXPECT_NE(d.reason.find("GRANT"), std::string::npos);
  EXPECT_TRUE(d.enforced);
}

TEST(ClickHouseSql, DenialIsClickHouseExceptionText) {
  Denial dn;
  dn.rule = "--pg-deny-verb DROP";
  dn.reason = "a DROP statement on t";
  dn.request_id = "req_1_2";
  const LlmAnswer a = denial_answer(dn, DenialFormat::ClickHouse);
  EXPECT_EQ(a.status, 403);
  EXPECT_EQ(a.body,
            "Code: 497. DB::Exception: faultline guard: denied by rule '--pg-deny-verb DROP': a DROP statement on t "
            "(request req_1_2). (ACCESS_DENIED)\n");
  bool code = false;
  for (const auto& [k, v] : a.headers) code |= k == "X-ClickHouse-Exception-Code" && v == "497";
  EXPECT_TRUE(code);
}

}  // namespace
}  // namespace faultline
