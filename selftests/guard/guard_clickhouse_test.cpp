// faultctl guard --clickhouse-host with Debian's clickhouse-server: a
// throw-away server on private loopback ports with its own config, users,
// data, tmp and log folders, stopped after; real curl through the guard run
// as the guarded command (faultctl as nobody when the test runs as root).
// A DROP TABLE is denied in ClickHouse's exception text naming the rule and
// the table stays; SELECT is allowed; unreadable SQL is denied; a 200 MB
// INSERT (its SQL in the body) streams with the guard's peak RSS (VmHWM)
// growing by 16 MiB at most.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/loopback_port.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using namespace std::chrono_literals;

const std::string kChFaultctl = FAULTCTL_PATH;
constexpr const char* kServer = "/usr/sbin/clickhouse-server";  // Debian's clickhouse-server

// clickhouse-server with everything it writes under one folder.
class ClickHouseServer {
 public:
  ClickHouseServer() {
    if (::access(kServer, X_OK) != 0)
      throw std::runtime_error(std::string("no ") + kServer + ": scripts/install-deps.sh installs clickhouse-server");
    http_port_ = fltest::free_loopback_port();
    const uint16_t tcp_port = fltest::free_loopback_port();
    const std::string d = dir_.path();
    for (const char* sub : {"data", "tmp", "log", "user_files", "format_schemas"})
      ::mkdir((d + "/" + sub).c_str(), 0755);
    fltest::write_file(dir_.file("users.xml"),
                       "<yandex><profiles><default></default></profiles><users><default><password></password>"
                       "<networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota>"
                       "</default></users><quotas><default></default></quotas></yandex>\n");
    fltest::write_file(
        dir_.file("config.xml"),
        "<yandex>\n"
        "  <logger><level>warning</level><log>" +
            d + "/log/server.log</log><errorlog>" + d +
            "/log/error.log</errorlog><console>0</console></logger>\n"
            "  <http_port>" +
            std::to_string(http_port_) + "</http_port>\n  <tcp_port>" + std::to_string(tcp_port) +
            "</tcp_port>\n"
            "  <listen_host>127.0.0.1</listen_host>\n"
            "  <path>" +
            d + "/data/</path>\n  <tmp_path>" + d + "/tmp/</tmp_path>\n  <user_files_path>" + d +
            "/user_files/</user_files_path>\n  <format_schema_path>" + d +
            "/format_schemas/</format_schema_path>\n"
            "  <users_config>" +
            d +
            "/users.xml</users_config>\n"
            "  <default_profile>default</default_profile>\n  <default_database>default</default_database>\n"
            "  <mark_cache_size>104857600</mark_cache_size>\n"
            "  <uncompressed_cache_size>104857600</uncompressed_cache_size>\n"
            "  <max_connections>64</max_connections>\n  <keep_alive_timeout>3</keep_alive_timeout>\n"
            "</yandex>\n");
    server_.emplace(
        fltest::ChildProcess::spawn({kServer, "--config-file=" + dir_.file("config.xml")}, {.stop_grace = 10s}));
    for (int i = 0; i < 300; ++i) {
      auto r = query("SELECT 1");
      if (r.status.is(0) && r.out == "1\n") return;
      if (!server_->running()) break;
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error("clickhouse-server did not answer: " + server_->describe());
  }
  ~ClickHouseServer() {
    if (server_) server_->stop(10s);
  }
  [[nodiscard]] uint16_t port() const { return http_port_; }
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(http_port_) + "/"; }
  // The server's answer to `sql`, straight (not through the guard).
  CommandResult query(const std::string& sql) const {
    return fltest::run_command({"curl", "-sS", "--noproxy", "*", "--max-time", "30", "--data-binary", sql, url()}, {},
                               40s);
  }

 private:
  fltest::TempDir dir_;
  uint16_t http_port_ = 0;
  std::optional<fltest::ChildProcess> server_;
};

class GuardClickHouseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      server_ = new ClickHouseServer();
    } catch (const std::exception& e) {
      setup_error_ = e.what();  // each test fails with it (never a skip)
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << setup_error_;
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_STATE_DIR=" + dir_.file("state")});
    for (const char* sql : {"DROP TABLE IF EXISTS keep", "CREATE TABLE keep (id UInt32) ENGINE = Log",
                            "INSERT INTO keep VALUES (1), (2), (3)"}) {
      auto r = server_->query(sql);
      ASSERT_TRUE(r.status.is(0) && r.out.empty()) << sql << ": " << r.describe();
    }
  }

  // faultctl guard FLAGS --clickhouse-host 127.0.0.1:PORT -- sh SCRIPT, with
  // C the server's URL in the script.
  CommandResult guard(std::vector<std::string> flags, const std::string& script) {
    fltest::write_file(dir_.file("run.sh"), "C='" + server_->url() + "'\n" + script);
    if (::chmod(dir_.file("run.sh").c_str(), 0755) != 0) throw std::runtime_error("chmod run.sh");
    flags.insert(flags.begin(), {"--clickhouse-host", "127.0.0.1:" + std::to_string(server_->port())});
    return fltest::run_command(
        fltest::guard_argv(kChFaultctl, flags, dir_.file("activity.jsonl"), {"sh", dir_.file("run.sh")}), {.env = env_},
        170s);
  }
  // The text after "KEY: " on the output's line for KEY.
  static std::string line_of(const std::string& out, const std::string& key) {
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(key + ": ", 0) == 0) return line.substr(key.size() + 2);
    return "";
  }

  static inline ClickHouseServer* server_ = nullptr;
  static inline std::string setup_error_;
  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

TEST_F(GuardClickHouseTest, DropIsDeniedInClickHouseTextAndTheTableStaysSelectIsAllowed) {
  auto r = guard(
      {"--enforce", "--pg-deny-verb", "DROP"},
      "echo \"select: $(curl -sS -w '[%{http_code}]' \"${C}?query=SELECT%20count()%20FROM%20keep\" | tr -d '\\n')\"\n"
      "echo \"drop: $(curl -sS -w '[%{http_code}]' --data-binary 'DROP TABLE keep' \"$C\" | tr -d '\\n')\"\n"
      "echo \"drop_get: $(curl -sS -w '[%{http_code}]' \"${C}?query=drop+table+default.keep\" | tr -d '\\n')\"\n"
      "echo \"grant: $(curl -sS -w '[%{http_code}]' --data-binary 'GRANT ALL ON *.* TO x' \"$C\" | tr -d '\\n')\"\n");
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(line_of(r.out, "select"), "3[200]") << r.out;
  for (const char* key : {"drop", "drop_get"}) {
    const std::string got = line_of(r.out, key);
    EXPECT_EQ(got.rfind("Code: 497. DB::Exception: faultline guard: denied by rule '--pg-deny-verb DROP': a DROP "
                        "statement on ",
                        0),
              0u)
        << got;
    EXPECT_NE(got.find("(ACCESS_DENIED)"), std::string::npos) << got;
    EXPECT_NE(got.find("[403]"), std::string::npos) << got;
  }
  const std::string grant = line_of(r.out, "grant");
  EXPECT_NE(grant.find("denied by rule 'sql_unparseable'"), std::string::npos) << grant;
  EXPECT_NE(grant.find("GRANT"), std::string::npos) << grant;
  EXPECT_NE(grant.find("[403]"), std::string::npos) << grant;
  // Nothing of the DROP reached the server.
  auto count = server_->query("SELECT count() FROM keep");
  EXPECT_EQ(count.out, "3\n") << count.describe();
  // The activity log names the rule of each denial.
  size_t denials = 0;
  for (const auto& e : fltest::activity_of_kind(dir_.file("activity.jsonl"), "request"))
    if (e.value("verdict", "") == "deny") {
      ++denials;
      EXPECT_TRUE(e.value("rule", "") == "--pg-deny-verb DROP" || e.value("rule", "") == "sql_unparseable") << e;
    }
  EXPECT_EQ(denials, 3u);
}

TEST_F(GuardClickHouseTest, MonitorForwardsWhatEnforceWouldDeny) {
  auto r = guard({"--pg-deny-table", "keep"},
                 "echo \"truncate: $(curl -sS -w '[%{http_code}]' --data-binary 'TRUNCATE TABLE keep' \"$C\")\"\n");
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(line_of(r.out, "truncate"), "[200]") << r.out;
  EXPECT_NE(r.err.find("would deny (rule --pg-deny-table keep: a TRUNCATE statement on keep"), std::string::npos)
      << r.err;
  EXPECT_EQ(server_->query("SELECT count() FROM keep").out, "0\n");
}

TEST_F(GuardClickHouseTest, A200MegabyteInsertStreamsThroughTheGuard) {
  ASSERT_TRUE(server_->query("DROP TABLE IF EXISTS big").status.is(0));
  auto made = server_->query("CREATE TABLE big (s String) ENGINE = Log");
  ASSERT_TRUE(made.status.is(0) && made.out.empty()) << made.describe();
  // The guard is the nearest faultctl above the script. Its peak RSS
  // (VmHWM) is read cold, after a 20 MB INSERT and after 2 Mi rows of 100
  // bytes (the SQL at the body's start, the data after it, sent chunked as
  // it is made). The first fast stream through the proxy touches its relay's
  // io_uring buffer ring (WorkerConfig: 1024 buffers of 16 KiB, 16 MiB), with
  // or without --clickhouse-host; the INSERT is measured from there, so that
  // what grows with the body is what is judged.
  const std::string insert =
      "yes \"$(printf '%099d' 0)\" | head -n $1 |"
      " { printf 'INSERT INTO big FORMAT TSV\\n'; cat; } |"
      " curl -sS -w '[%{http_code}]' -T - -X POST \"$C\"";
  auto r = guard({"--enforce", "--pg-deny-verb", "DROP"},
                 "g=$PPID\n"
                 "while [ \"$(cat /proc/$g/comm)\" != faultctl ] && [ \"$g\" -gt 1 ]; do\n"
                 "  g=$(awk '/^PPid/{print $2}' /proc/$g/status)\ndone\n"
                 "hwm() { awk '/^VmHWM/{print $2}' /proc/$g/status; }\n"
                 "rows() { " +
                     insert +
                     "; }\n"
                     "curl -sS -o /dev/null \"${C}?query=SELECT%201\"\n"
                     "echo \"cold: $(hwm)\"\n"
                     "echo \"warm_insert: $(rows 209715)\"\n"
                     "echo \"before: $(hwm)\"\n"
                     "echo \"insert: $(rows 2097152)\"\n"
                     "echo \"after: $(hwm)\"\n");
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(line_of(r.out, "warm_insert"), "[200]") << r.out;
  EXPECT_EQ(line_of(r.out, "insert"), "[200]") << r.out;
  EXPECT_EQ(server_->query("SELECT count(), sum(length(s)) FROM big").out, "2306867\t228379833\n");
  const std::string cold = line_of(r.out, "cold"), before = line_of(r.out, "before"), after = line_of(r.out, "after");
  ASSERT_FALSE(cold.empty() || before.empty() || after.empty()) << r.out;
  const long grew_kb = std::stol(after) - std::stol(before);
  EXPECT_LE(grew_kb, 16 * 1024) << "the guard's VmHWM grew from " << before << " kB to " << after << " kB";
  // And the whole run, the buffer ring included, stays bounded.
  EXPECT_LE(std::stol(after) - std::stol(cold), 24 * 1024) << "cold " << cold << " kB, after " << after << " kB";
  std::cout << "guard VmHWM: " << cold << " kB cold, " << before << " kB after 20 MB, " << after
            << " kB after the 200 MB INSERT\n";
  (void)server_->query("DROP TABLE big");
}

TEST_F(GuardClickHouseTest, ABadClickHouseHostIsRefusedByName) {
  auto r = fltest::run_command(fltest::as_nobody({kChFaultctl, "guard", "--clickhouse-host", "bad host", "--", "true"}),
                               {.env = env_}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--clickhouse-host 'bad host'"), std::string::npos) << r.err;
  r = fltest::run_command(fltest::as_nobody({kChFaultctl, "guard", "--pg-deny-verb", "DROP", "--", "true"}),
                          {.env = env_}, 30s);
  EXPECT_TRUE(r.status.is(2)) << r.describe();
  EXPECT_NE(r.err.find("--clickhouse-host"), std::string::npos) << r.err;
}

}  // namespace
