// The faultcp binary: serve on each backend, answer /healthz, stop on SIGTERM,
// start again on the same database (migrations applied once), refuse bad flags.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>

#include "cp/storage/migrations.h"
#include "cp_client.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/test_cert.h"

namespace {

using fltest::Backend;
using namespace std::chrono_literals;

class ServeTest : public ::testing::TestWithParam<Backend> {};

uint16_t port_of(const std::string& line) {
  const auto at = line.find("listening on 127.0.0.1:");
  if (at == std::string::npos) return 0;
  return static_cast<uint16_t>(std::stoul(line.substr(at + 23)));
}

TEST_P(ServeTest, ServesStopsOnSigtermAndRestartsOnTheSameDatabase) {
  fltest::TestDatabase db(GetParam());
  for (int round = 0; round < 2; ++round) {
    auto cp = fltest::ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", db.url()});
    auto line = cp.wait_line_starting("faultcp: listening on", 20s);
    ASSERT_TRUE(line.has_value()) << cp.describe();
    EXPECT_NE(line->find("schema version " + std::to_string(faultline::cp::latest_schema_version())), std::string::npos)
        << *line;
    const uint16_t port = port_of(*line);
    auto h = fltest::cp_request(port, "GET", "/healthz");
    EXPECT_EQ(h.status, 200) << h.describe();
    if (round == 0) {
      auto s = fltest::cp_request(port, "POST", "/v1/auth/signup", "",
                                  R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})");
      EXPECT_EQ(s.status, 201) << s.describe();
    } else {
      auto l = fltest::cp_request(port, "POST", "/v1/auth/login", "",
                                  R"({"email":"a@example.com","password":"correct horse battery"})");
      EXPECT_EQ(l.status, 200) << "the account did not survive a restart: " << l.describe();
    }
    cp.signal(SIGTERM);
    auto st = cp.wait(10s);
    ASSERT_TRUE(st.has_value()) << cp.describe();
    EXPECT_TRUE(st->is(0)) << cp.describe();
  }
  auto store = db.open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->sql().query("SELECT COUNT(*) FROM schema_migrations")->at(0).at(0),
            std::to_string(faultline::cp::latest_schema_version()));
}

// kill -9 of faultcp while an experiment is dispatched: after the restart it
// is not handed out again (at most once), its agent's reports still land, and
// an experiment still queued is dispatched exactly once.
TEST_P(ServeTest, AfterKill9ADispatchedExperimentIsNeverDispatchedAgain) {
  fltest::TestDatabase db(GetParam());
  auto start = [&] {
    auto cp = fltest::ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", db.url()});
    auto line = cp.wait_line_starting("faultcp: listening on", 20s);
    if (!line) ADD_FAILURE() << cp.describe();
    return std::make_pair(std::move(cp), line ? port_of(*line) : uint16_t{0});
  };
  auto [first, port] = start();
  ASSERT_NE(port, 0);
  auto signup = fltest::cp_request(port, "POST", "/v1/auth/signup", "",
                                   R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})");
  const std::string token = signup.json().value("token", "");
  const std::string enroll =
      fltest::cp_request(port, "POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json().value("token", "");
  auto reg = fltest::cp_request(port, "POST", "/v1/agents/register", enroll, R"({"hostname":"h"})").json();
  const std::string agent = std::to_string(reg.value("agent_id", 0)), agent_token = reg.value("token", "");
  const std::string spec = R"(,"spec":{"kind":"loss","target":"10.0.0.1","duration_sec":5}})";
  const int64_t running = fltest::cp_request(port, "POST", "/v1/experiments", token, R"({"agent_id":)" + agent + spec)
                              .json()
                              .value("id", int64_t{0});
  const int64_t queued = fltest::cp_request(port, "POST", "/v1/experiments", token, R"({"agent_id":)" + agent + spec)
                             .json()
                             .value("id", int64_t{0});
  const std::string next = "/v1/agents/" + agent + "/next?wait_ms=0";
  ASSERT_EQ(fltest::cp_request(port, "GET", next, agent_token).json()["experiment"]["id"], running);
  first.kill_and_reap();

  auto [second, port2] = start();
  ASSERT_NE(port2, 0);
  auto after = fltest::cp_request(port2, "GET", next, agent_token).json();
  EXPECT_EQ(after["experiment"]["id"], queued) << "after the restart: " << after;
  EXPECT_TRUE(fltest::cp_request(port2, "GET", next, agent_token).json()["experiment"].is_null())
      << "an experiment was dispatched twice";
  const std::string events = "/v1/agents/" + agent + "/events";
  EXPECT_EQ(fltest::cp_request(port2, "POST", events, agent_token,
                               R"({"experiment_id":)" + std::to_string(running) + R"(,"type":"running"})")
                .status,
            200);
  EXPECT_EQ(fltest::cp_request(port2, "POST", events, agent_token,
                               R"({"experiment_id":)" + std::to_string(running) + R"(,"type":"completed"})")
                .status,
            200);
  EXPECT_EQ(fltest::cp_request(port2, "GET", "/v1/experiments/" + std::to_string(running), token).json()["status"],
            "completed");
  EXPECT_EQ(fltest::cp_request(port2, "POST", "/v1/audit/verify", token).json()["ok"], true);
  second.signal(SIGTERM);
  EXPECT_TRUE(second.wait(10s).has_value());
}

INSTANTIATE_TEST_SUITE_P(Backends, ServeTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

// HTTPS with a certificate made for the test: curl verifies it against the
// certificate itself and reads /healthz; plain HTTP to the TLS port is not served.
TEST(ServeTls, ServesHttpsWithTheGivenCertificate) {
  char tmpl[] = "/tmp/fl-cp-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, cert = dir + "/cert.pem", key = dir + "/key.pem";
  auto made = fltest::make_self_signed_cert(cert, key, "localhost");
  ASSERT_TRUE(made.status.is(0)) << made.describe();
  auto cp = fltest::ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database",
                                         "sqlite:" + dir + "/state/db", "--tls-cert", cert, "--tls-key", key});
  auto line = cp.wait_line_starting("faultcp: listening on", 20s);
  ASSERT_TRUE(line.has_value()) << cp.describe();
  EXPECT_NE(line->find("with TLS"), std::string::npos) << *line;
  // The database's folder is made, and it and the file are private (password hashes).
  struct stat folder {
  }, file{};
  ASSERT_EQ(::stat((dir + "/state").c_str(), &folder), 0);
  ASSERT_EQ(::stat((dir + "/state/db").c_str(), &file), 0);
  EXPECT_EQ(folder.st_mode & 0777, 0700u);
  EXPECT_EQ(file.st_mode & 0077, 0u) << std::oct << file.st_mode;
  const std::string port = std::to_string(port_of(*line));
  auto https =
      fltest::run_command({"curl", "-sS", "--cacert", cert, "https://127.0.0.1:" + port + "/healthz"}, {}, 30s);
  EXPECT_TRUE(https.status.is(0)) << https.describe();
  EXPECT_NE(https.out.find("\"status\":\"ok\""), std::string::npos) << https.describe();
  auto signup = fltest::run_command({"curl", "-sS", "--cacert", cert, "-d",
                                     R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})",
                                     "https://127.0.0.1:" + port + "/v1/auth/signup"},
                                    {}, 30s);
  EXPECT_NE(signup.out.find("flcp_sess_"), std::string::npos) << signup.describe();
  auto plain = fltest::cp_request(port_of(*line), "GET", "/healthz", "", "", 2000);
  EXPECT_EQ(plain.status, 0) << "plain HTTP answered on the TLS port: " << plain.describe();
  auto again =
      fltest::run_command({"curl", "-sS", "--cacert", cert, "https://127.0.0.1:" + port + "/healthz"}, {}, 30s);
  EXPECT_TRUE(again.status.is(0)) << "a bad client broke the server: " << again.describe();
  cp.signal(SIGTERM);
  auto st = cp.wait(10s);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->is(0)) << cp.describe();
  auto bad_key = fltest::run_command(
      {FAULTCP_PATH, "serve", "--database", "sqlite:" + dir + "/db", "--tls-cert", cert, "--tls-key", cert}, {}, 10s);
  EXPECT_TRUE(bad_key.status.is(2)) << bad_key.describe();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(ServeFlags, ABadDatabaseOrListenAddressIsExit2) {
  auto bad_db = fltest::run_command({FAULTCP_PATH, "serve", "--database", "mysql://x"}, {}, 10s);
  EXPECT_TRUE(bad_db.status.is(2)) << bad_db.describe();
  EXPECT_NE(bad_db.err.find("--database"), std::string::npos) << bad_db.err;
  auto bad_listen = fltest::run_command(
      {FAULTCP_PATH, "serve", "--listen", "nowhere", "--database", "sqlite:/tmp/fl-cp-flags-test.db"}, {}, 10s);
  EXPECT_TRUE(bad_listen.status.is(2)) << bad_listen.describe();
  ::unlink("/tmp/fl-cp-flags-test.db");
  ::unlink("/tmp/fl-cp-flags-test.db-wal");
  ::unlink("/tmp/fl-cp-flags-test.db-shm");
  auto help = fltest::run_command({FAULTCP_PATH, "serve", "--help"}, {}, 10s);
  EXPECT_TRUE(help.status.is(0));
  EXPECT_NE(help.out.find("EXAMPLES"), std::string::npos);
}

}  // namespace
