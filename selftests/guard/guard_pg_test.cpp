// faultctl guard's Postgres gate with Debian's PostgreSQL 15: a throw-away
// cluster on a private port and folder (scram-sha-256 on 127.0.0.1), real psql
// and pgbench (extended protocol, -M prepared) through the gate run as the
// guarded command; faultctl as nobody when the test runs as root. Denied
// statements get 42501 naming the rule, the transaction is aborted on the
// server (25P02 next), the table stays; the activity log names verb, table,
// verdict and rule, and never the password.
#include <arpa/inet.h>
#include <glob.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <tuple>

#include "base/unique_fd.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/loopback_port.h"
#include "selftests/lib/require_root.h"

namespace {

using fltest::CommandResult;
using namespace std::chrono_literals;

const std::string kFaultctl = FAULTCTL_PATH;
constexpr const char* kPassword = "s3cret-Pg-pass-4711";

std::string pg_bin() {
  glob_t g{};
  std::string found;
  if (::glob("/usr/lib/postgresql/*/bin/pg_ctl", 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
    found = g.gl_pathv[g.gl_pathc - 1];
    found = found.substr(0, found.rfind('/'));
  }
  globfree(&g);
  return found;
}

// nobody through setpriv when we are root (PostgreSQL refuses root; faultctl
// runs as a user would).
std::vector<std::string> as_user(std::vector<std::string> argv) { return fltest::as_nobody(std::move(argv)); }

// A cluster with password authentication over TCP on 127.0.0.1.
class ScramCluster {
 public:
  ScramCluster() : bin_(pg_bin()) {
    if (bin_.empty())
      throw std::runtime_error("no /usr/lib/postgresql/*/bin: scripts/install-deps.sh installs postgresql");
    char tmpl[] = "/tmp/fl-pg-gate-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0777);
    std::ofstream(dir_ + "/pw") << kPassword << "\n";
    ::chmod((dir_ + "/pw").c_str(), 0644);
    port_ = fltest::free_loopback_port();
    // ssl=on: a self-signed certificate for 127.0.0.1 (its own CA, for verify-full), and another one
    // that signed nothing here (the wrong CA).
    for (const char* name : {"server", "other"}) {
      auto cert = fltest::run_command(
          as_user({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                   "-days", "2", "-subj", std::string("/CN=faultline pg gate test ") + name, "-addext",
                   "subjectAltName=IP:127.0.0.1", "-keyout", dir_ + "/" + name + ".key", "-out",
                   dir_ + "/" + name + ".crt"}),
          {}, 60s);
      if (!cert.status.is(0)) throw std::runtime_error("openssl req: " + cert.describe());
    }
    auto init = fltest::run_command(
        as_user({bin_ + "/initdb", "-D", dir_ + "/data", "-U", "gate", "--pwfile", dir_ + "/pw", "--auth=scram-sha-256",
                 "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"}),
        {}, 120s);
    if (!init.status.is(0)) throw std::runtime_error("initdb: " + init.describe());
    auto start = fltest::run_command(
        as_user({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/log", "-w", "-t", "60", "-o",
                 "-k " + dir_ + " -p " + std::to_string(port_) +
                     " -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=20"
                     " -c ssl=on -c ssl_cert_file=" +
                     dir_ + "/server.crt -c ssl_key_file=" + dir_ + "/server.key",
                 "start"}),
        {}, 90s);
    if (!start.status.is(0)) throw std::runtime_error("pg_ctl start: " + start.describe());
    started_ = true;
  }
  ~ScramCluster() {
    if (started_)
      (void)fltest::run_command(as_user({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"}), {},
                                60s);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] const std::string& bin() const { return bin_; }
  // psql straight to the server (not through the gate).
  CommandResult psql(const std::string& sql) const {
    return fltest::run_command({bin_ + "/psql", "-X", "-At", "-h", "127.0.0.1", "-p", std::to_string(port_), "-U",
                                "gate", "-d", "postgres", "-c", sql},
                               {.env = {std::string("PGPASSWORD=") + kPassword}}, 30s);
  }

 private:
  std::string bin_;
  std::string dir_;
  uint16_t port_ = 0;
  bool started_ = false;
};

class GuardPgTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new ScramCluster(); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    auto r = cluster_->psql("DROP TABLE IF EXISTS t; CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2)");
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    log_ = cluster_->dir() + "/activity-" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
  }
  void TearDown() override { std::filesystem::remove(log_); }

  // faultctl guard with the gate in front of the cluster, running cmd.
  std::vector<std::string> guard_argv(std::vector<std::string> flags, std::vector<std::string> cmd) const {
    std::vector<std::string> argv = {kFaultctl,       "guard",
                                     "--pg-listen",   "127.0.0.1:0",
                                     "--pg-upstream", "127.0.0.1:" + std::to_string(cluster_->port()),
                                     "--json-log",    log_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), cmd.begin(), cmd.end());
    return as_user(argv);
  }
  static std::vector<std::string> env() {
    return {std::string("PGPASSWORD=") + kPassword,
            "PGUSER=gate",
            "PGDATABASE=postgres",
            "PGHOST=",
            "PGPORT=",
            "XDG_RUNTIME_DIR=",
            "FAULTLINE_STATE_DIR=" + cluster_->dir() + "/state"};
  }
  CommandResult guard(std::vector<std::string> flags, std::vector<std::string> cmd) {
    return fltest::run_command(guard_argv(std::move(flags), std::move(cmd)), {.env = env()}, 60s);
  }
  fltest::ChildProcess guard_child(std::vector<std::string> flags, std::vector<std::string> cmd) {
    return fltest::ChildProcess::spawn(guard_argv(std::move(flags), std::move(cmd)), {.env = env()});
  }
  std::vector<std::string> psql(std::vector<std::string> commands) const {
    std::vector<std::string> argv = {cluster_->bin() + "/psql", "-X", "-At", "-v", "VERBOSITY=verbose"};
    for (auto& c : commands) {
      argv.push_back("-c");
      argv.push_back(c);
    }
    return argv;
  }
  std::vector<nlohmann::json> activity() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(log_);
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  std::string activity_text() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void expect_table_intact() const {
    auto r = cluster_->psql("SELECT count(*) FROM t");
    ASSERT_TRUE(r.status.is(0)) << r.describe();
    EXPECT_EQ(r.out, "2\n");
  }

  static ScramCluster* cluster_;
  std::string log_;
};

ScramCluster* GuardPgTest::cluster_ = nullptr;

TEST_F(GuardPgTest, DropInATransactionIs42501ThenAbortedAndTheTableStays) {
  auto r = guard({"--enforce", "--pg-deny-verb", "DROP"}, psql({"BEGIN", "DROP TABLE t", "SELECT 1", "ROLLBACK"}));
  // psql goes on after an error: its exit code is 0 here, what it printed tells.
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("ERROR:  42501: blocked by faultline: --pg-deny-verb DROP: denied by rule"), std::string::npos)
      << r.describe();
  EXPECT_NE(r.err.find("ERROR:  25P02: current transaction is aborted"), std::string::npos) << r.describe();
  EXPECT_EQ(r.out.find("1\n"), std::string::npos) << r.describe();  // SELECT 1 did not run
  expect_table_intact();
  EXPECT_NE(r.err.find("faultline guard: pg: Q DROP t -> deny (rule --pg-deny-verb DROP"), std::string::npos) << r.err;
  // The activity log: one line per statement judged, the password nowhere.
  bool drop_line = false;
  for (const auto& e : activity()) {
    if (e["kind"] != "sql") continue;
    if (e["method"] == "DROP") {
      EXPECT_EQ(e["path"], "t");
      EXPECT_EQ(e["verdict"], "deny");
      EXPECT_EQ(e["rule"], "--pg-deny-verb DROP");
      EXPECT_EQ(e["host"], "127.0.0.1:" + std::to_string(cluster_->port()) + "/postgres");
      drop_line = true;
    }
  }
  EXPECT_TRUE(drop_line) << activity_text();
  EXPECT_EQ(activity_text().find(kPassword), std::string::npos);
  EXPECT_EQ(r.err.find(kPassword), std::string::npos);
  auto v = fltest::run_command({kFaultctl, "activity", "verify", log_}, {}, 20s);
  EXPECT_TRUE(v.status.is(0)) << v.describe();
}

TEST_F(GuardPgTest, AllowedSelectWorksAndMultiStatementIsJudgedWhole) {
  auto r = guard({"--enforce", "--pg-deny-table", "t"}, psql({"SELECT 1; DELETE FROM t", "SELECT 40 + 2"}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.out.find("42\n"), std::string::npos) << r.describe();
  // The message with a denied statement is refused whole: SELECT 1 of it did not run either.
  EXPECT_NE(r.err.find("ERROR:  42501: blocked by faultline: --pg-deny-table t: denied by rule"), std::string::npos)
      << r.describe();
  EXPECT_EQ(r.out, "42\n") << r.describe();
  EXPECT_NE(r.err.find("Q SELECT -> deny (with its message) (rule --pg-deny-table t"), std::string::npos) << r.err;
  expect_table_intact();
}

TEST_F(GuardPgTest, MonitorLetsItThroughAndLogsWouldDeny) {
  auto r = guard({"--pg-deny-verb", "DELETE"}, psql({"DELETE FROM t WHERE id = 2"}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("-> would deny (monitor: passed on)"), std::string::npos) << r.err;
  auto c = cluster_->psql("SELECT count(*) FROM t");
  EXPECT_EQ(c.out, "1\n");
}

TEST_F(GuardPgTest, DoAndUnparseableAreDeniedWhenEnforcing) {
  auto r = guard({"--enforce"}, psql({"DO $$ BEGIN DROP TABLE t; END $$", "SELEC 1", "SELECT 5"}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "5\n") << r.describe();
  EXPECT_NE(r.err.find("42501: blocked by faultline: sql_do:"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("42501: blocked by faultline: sql_unparseable: the SQL does not parse"), std::string::npos)
      << r.describe();
  expect_table_intact();
}

TEST_F(GuardPgTest, PreparedStatementsOverTheExtendedProtocol) {
  // pgbench -M prepared: Parse, Bind, Execute, Sync for each statement.
  const std::string script = cluster_->dir() + "/bench-" + std::to_string(::getpid()) + ".sql";
  std::ofstream(script) << "SELECT count(*) FROM t;\nDROP TABLE t;\n";
  ::chmod(script.c_str(), 0644);
  auto r = guard({"--enforce", "--pg-deny-verb", "DROP"},
                 {cluster_->bin() + "/pgbench", "-n", "-M", "prepared", "-t", "1", "-f", script});
  std::filesystem::remove(script);
  EXPECT_FALSE(r.status.is(0)) << r.describe();  // pgbench stops at the error
  EXPECT_NE((r.out + r.err).find("blocked by faultline: --pg-deny-verb DROP"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("faultline guard: pg: P SELECT t -> allow"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("faultline guard: pg: P DROP t -> deny"), std::string::npos) << r.err;
  expect_table_intact();
}

TEST_F(GuardPgTest, NodePgNamedPreparedStatements) {
  const std::string script = std::string(PG_CLIENT_DIR) + "/pg_prepared.mjs";
  if (!std::filesystem::exists(std::string(PG_CLIENT_DIR) + "/node_modules/pg"))
    GTEST_SKIP() << "SKIPPED: no " << PG_CLIENT_DIR << "/node_modules/pg: scripts/install-deps.sh installs it (npm ci)";
  auto r = guard({"--enforce", "--pg-deny-verb", "DROP"}, {"node", script});
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  std::vector<nlohmann::json> steps;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) steps.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(steps.size(), 3u) << r.describe();
  EXPECT_EQ(steps[0]["rows"][0]["n"], 2) << steps[0];
  EXPECT_EQ(steps[1]["ok"], false);
  EXPECT_EQ(steps[1]["code"], "42501") << steps[1];
  EXPECT_EQ(steps[1]["message"], "blocked by faultline: --pg-deny-verb DROP: denied by rule");
  // The session goes on: the named statement prepared before is used again.
  EXPECT_EQ(steps[2]["rows"][0]["n"], 1) << steps[2];
  EXPECT_NE(r.err.find("faultline guard: pg: P DROP t -> deny"), std::string::npos) << r.err;
  expect_table_intact();
}

TEST_F(GuardPgTest, ApprovalTimeoutDeniesTheHeldStatement) {
  auto r = guard({"--enforce", "--pg-approve-verb", "DELETE", "--approve-timeout", "300ms"},
                 psql({"DELETE FROM t", "SELECT 7"}));
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("held for approval"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("42501: blocked by faultline: --pg-approve-verb DELETE: no approval within the timeout"),
            std::string::npos)
      << r.describe();
  EXPECT_NE(r.out.find("7\n"), std::string::npos) << r.describe();  // the session goes on
  expect_table_intact();
}

TEST_F(GuardPgTest, HeldStatementApprovedRunsAndTheSessionGoesOn) {
  auto g = guard_child({"--enforce", "--pg-approve-verb", "DELETE", "--approve-timeout", "60s"},
                       psql({"DELETE FROM t WHERE id = 1", "SELECT count(*) FROM t"}));
  // The statement's line ("Q DELETE t -> held for approval (rule ...)") comes first; then the id's.
  ASSERT_TRUE(g.wait_for("faultctl approvals approve ", 30s, fltest::Stream::kStderr)) << g.describe();
  std::smatch m;
  const std::string err = g.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("held for approval ([0-9]+\\.[0-9]+)"))) << err;
  const std::string id = m[1].str();
  auto list = fltest::run_command(as_user({kFaultctl, "approvals", "list"}), {.env = env()}, 20s);
  ASSERT_TRUE(list.status.is(0)) << list.describe();
  EXPECT_NE(list.out.find(id), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("DELETE"), std::string::npos) << list.out;
  EXPECT_EQ(cluster_->psql("SELECT count(*) FROM t").out, "2\n");  // not run yet
  auto ok = fltest::run_command(as_user({kFaultctl, "approvals", "approve", id}), {.env = env()}, 20s);
  ASSERT_TRUE(ok.status.is(0)) << ok.describe();
  auto end = g.finish(30s);
  ASSERT_TRUE(end.status.is(0)) << end.describe();
  EXPECT_NE(end.out.find("DELETE 1\n1\n"), std::string::npos) << end.describe();
  EXPECT_NE(end.err.find("held (1 approved)"), std::string::npos) << end.err;
  bool held = false, allowed = false;
  for (const auto& e : activity()) {
    if (e["kind"] != "sql" || e["method"] != "DELETE") continue;
    held = held || e["verdict"] == "approve";
    allowed = allowed || e["verdict"] == "allow";
  }
  EXPECT_TRUE(held && allowed) << activity_text();
}

TEST_F(GuardPgTest, CancelRequestReachesTheServerWithItsKey) {
  // psql sends a CancelRequest (with the gate's key, on a new connection) on SIGINT; over TLS to the
  // server too.
  for (const char* mode : {"disable", "require"}) {
    SCOPED_TRACE(mode);
    // A marker unique to this run names the psql to interrupt (other tests may run psql meanwhile).
    const std::string marker = std::string("cancel-") + mode + "-" + std::to_string(::getpid());
    auto g = guard_child({"--enforce", "--pg-upstream-sslmode", mode}, psql({"SELECT pg_sleep(60), '" + marker + "'"}));
    ASSERT_TRUE(g.wait_for("Q SELECT -> allow", 30s, fltest::Stream::kStderr)) << g.describe();
    auto pids = fltest::run_command({"pgrep", "-f", "^" + cluster_->bin() + "/psql .*'" + marker + "'"}, {}, 10s);
    ASSERT_TRUE(pids.status.is(0)) << pids.describe();
    ASSERT_EQ(pids.out.find('\n'), pids.out.size() - 1) << "one psql expected: " << pids.out;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(std::stoi(pids.out), SIGINT), 0);
    auto end = g.finish(30s);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);  // canceled, not slept out
    EXPECT_NE(end.err.find("57014: canceling statement due to user request"), std::string::npos) << end.describe();
  }
}

TEST_F(GuardPgTest, RequireRefusesAnUpstreamWithoutTls) {
  // A stand-in upstream that answers the SSLRequest 'N', as a server with ssl=off does.
  faultline::UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l.get(), 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string asked;
  std::thread server([&] {
    faultline::UniqueFd c(::accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) return;
    char buf[8];
    size_t got = 0;
    while (got < sizeof buf) {
      const ssize_t n = ::recv(c.get(), buf + got, sizeof buf - got, 0);
      if (n <= 0) return;
      got += size_t(n);
    }
    asked.assign(buf, sizeof buf);
    (void)!::send(c.get(), "N", 1, MSG_NOSIGNAL);
    while (::recv(c.get(), buf, sizeof buf, 0) > 0) {
    }
  });
  const std::string upstream = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::vector<std::string> argv = {
      kFaultctl, "guard", "--pg-listen", "127.0.0.1:0", "--pg-upstream", upstream, "--pg-upstream-sslmode",
      "require", "--"};
  for (const auto& arg : psql({"SELECT 1"})) argv.push_back(arg);
  auto r = fltest::run_command(as_user(argv), {.env = env()}, 60s);
  server.join();
  EXPECT_EQ(asked, std::string("\0\0\0\x08\x04\xd2\x16\x2f", 8));  // SSLRequest
  EXPECT_FALSE(r.status.is(0)) << r.describe();
  EXPECT_NE(r.err.find("FATAL:  faultline: the upstream " + upstream +
                       " does not offer TLS (--pg-upstream-sslmode require needs it)"),
            std::string::npos)
      << r.describe();
}

TEST_F(GuardPgTest, UpstreamSslModesReachTheServerOverTlsOrNot) {
  const std::string ssl = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
  for (auto [flags, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "f"},
           {{"--pg-upstream-sslmode", "disable"}, "f"},
           {{"--pg-upstream-sslmode", "require"}, "t"},
           {{"--pg-upstream-sslmode", "verify-full", "--pg-upstream-ca", cluster_->dir() + "/server.crt"}, "t"},
       }) {
    flags.insert(flags.end(), {"--enforce", "--pg-deny-verb", "DROP"});
    auto r = guard(flags, psql({"DROP TABLE t", ssl}));
    EXPECT_TRUE(r.status.is(0)) << r.describe();  // psql goes on after the DROP's error
    EXPECT_EQ(r.out, want + "\n") << r.describe();
    EXPECT_NE(r.err.find("42501: blocked by faultline: --pg-deny-verb DROP"), std::string::npos) << r.describe();
    expect_table_intact();
  }
}

TEST_F(GuardPgTest, VerifyFullRefusesAServerItCannotVerify) {
  const std::string port = std::to_string(cluster_->port());
  for (auto [upstream, ca, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"127.0.0.1:" + port, "other.crt", "certificate verify failed: self-signed certificate"},
           // The certificate names 127.0.0.1 only.
           {"localhost:" + port, "server.crt", "certificate verify failed: hostname mismatch"},
       }) {
    std::vector<std::string> argv = {kFaultctl,
                                     "guard",
                                     "--pg-listen",
                                     "127.0.0.1:0",
                                     "--pg-upstream",
                                     upstream,
                                     "--pg-upstream-sslmode",
                                     "verify-full",
                                     "--pg-upstream-ca",
                                     cluster_->dir() + "/" + ca,
                                     "--"};
    for (const auto& a : psql({"SELECT 1"})) argv.push_back(a);
    auto r = fltest::run_command(as_user(argv), {.env = env()}, 60s);
    EXPECT_FALSE(r.status.is(0)) << r.describe();
    EXPECT_EQ(r.out, "") << r.describe();
    // psql's FATAL (08006, which psql does not print before a session) and the gate's own line name it.
    EXPECT_NE(r.err.find("FATAL:  faultline: TLS to the upstream " + upstream + ": " + want), std::string::npos)
        << r.describe();
    EXPECT_NE(r.err.find("faultline guard: pg: connection from 127.0.0.1:"), std::string::npos) << r.describe();
  }
}

TEST_F(GuardPgTest, AsRootADirectConnectToTheUpstreamIsJudgedByTheGate) {
  FL_REQUIRE_ROOT("the guard's transparent capture (a BPF program on the command's cgroup)");
  // psql told the server's own address and port, not PGHOST/PGPORT: the kernel sends it to the gate.
  const std::string port = std::to_string(cluster_->port());
  std::vector<std::string> argv = {kFaultctl,
                                   "guard",
                                   "--enforce",
                                   "--pg-listen",
                                   "127.0.0.1:0",
                                   "--pg-upstream",
                                   "127.0.0.1:" + port,
                                   "--pg-deny-verb",
                                   "DROP",
                                   "--",
                                   cluster_->bin() + "/psql",
                                   "-X",
                                   "-At",
                                   "-v",
                                   "VERBOSITY=verbose",
                                   "-h",
                                   "127.0.0.1",
                                   "-p",
                                   port,
                                   "-c",
                                   "DROP TABLE t",
                                   "-c",
                                   "SELECT 41 + 1"};
  auto r = fltest::run_command(argv, {.env = env()}, 60s);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, "42\n") << r.describe();
  EXPECT_NE(r.err.find("ERROR:  42501: blocked by faultline: --pg-deny-verb DROP"), std::string::npos) << r.describe();
  EXPECT_NE(r.err.find("connect 127.0.0.1:" + port + "/tcp -> redirect to 127.0.0.1:"), std::string::npos)
      << r.describe();
  expect_table_intact();
}

TEST_F(GuardPgTest, BadFlagsAreRefusedByName) {
  for (auto [flags, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--pg-deny-verb", "DROP TABLE"}, "--pg-deny-verb 'DROP TABLE': a SQL verb is a word of letters"},
           {{"--pg-deny-table", "a b"}, "--pg-deny-table 'a b': a table or function glob has no spaces"},
           {{"--pg-upstream-sslmode", "prefer"},
            "--pg-upstream-sslmode 'prefer': one of disable, require, verify-full"},
           {{"--pg-upstream-sslmode", "require", "--pg-upstream-ca", "/etc/hostname"},
            "--pg-upstream-ca /etc/hostname: the CA checks the server's certificate, which only --pg-upstream-sslmode "
            "verify-full does"},
           {{"--pg-upstream-sslmode", "verify-full", "--pg-upstream-ca", "/nonexistent/ca.pem"},
            "--pg-upstream-ca /nonexistent/ca.pem: No such file or directory"},
       }) {
    auto r = guard(flags, {"true"});
    EXPECT_TRUE(r.status.is(2)) << r.describe();
    EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  }
  auto r = fltest::run_command(
      as_user({kFaultctl, "guard", "--pg-listen", "10.0.0.1:5432", "--pg-upstream", "127.0.0.1:1", "--", "true"}), {},
      30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--pg-listen 10.0.0.1:5432: a loopback address"), std::string::npos) << r.err;
  r = fltest::run_command(as_user({kFaultctl, "guard", "--pg-deny-verb", "DROP", "--", "true"}), {}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("give --pg-listen and --pg-upstream"), std::string::npos) << r.err;
  r = fltest::run_command(as_user({kFaultctl, "guard", "--pg-upstream-sslmode", "require", "--", "true"}), {}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--pg-upstream-sslmode goes with --pg-listen and --pg-upstream"), std::string::npos) << r.err;
}

}  // namespace
