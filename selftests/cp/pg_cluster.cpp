// initdb, pg_ctl start, CREATE DATABASE, pg_ctl stop, rm -rf.
#include "pg_cluster.h"

#include <glob.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

#include "cp/storage/sql_connection.h"
#include "selftests/lib/child_process.h"
#include "selftests/lib/loopback_port.h"

namespace fltest {
namespace {

std::string find_pg_bin() {
  glob_t g{};
  std::string found;
  if (::glob("/usr/lib/postgresql/*/bin/pg_ctl", 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
    found = g.gl_pathv[g.gl_pathc - 1];  // the newest version
    found = found.substr(0, found.rfind('/'));
  }
  globfree(&g);
  if (found.empty())
    throw std::runtime_error("no /usr/lib/postgresql/*/bin/pg_ctl: scripts/install-deps.sh installs postgresql");
  return found;
}

}  // namespace

PgCluster::PgCluster() : bin_(find_pg_bin()) {
  char tmpl[] = "/tmp/fl-pg-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  port_ = fltest::free_loopback_port();
  as_nobody_ = ::geteuid() == 0;
  if (as_nobody_) {
    const passwd* pw = ::getpwnam("nobody");
    if (pw == nullptr) throw std::runtime_error("PostgreSQL will not run as root and there is no user nobody");
    if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) throw std::runtime_error("chown " + dir_);
  }
  auto as_owner = [this](std::vector<std::string> argv) {
    if (as_nobody_) argv.insert(argv.begin(), {"runuser", "-u", "nobody", "--"});
    return argv;
  };
  auto init = run_command(as_owner({bin_ + "/initdb", "-D", dir_ + "/data", "-U", "faultcp", "-A", "trust", "-E",
                                    "UTF8", "--locale=C", "--no-sync", "--no-instructions"}),
                          {}, 120s);
  if (!init.status.is(0)) throw std::runtime_error("initdb failed: " + init.describe());
  // No TCP at all (listen_addresses ''); the port only names the socket file.
  auto start =
      run_command(as_owner({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/log", "-w", "-t", "60", "-o",
                            "-k " + dir_ + " -p " + std::to_string(port_) +
                                " -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
                                "-c full_page_writes=off -c max_connections=50",
                            "start"}),
                  {}, 90s);
  if (!start.status.is(0)) throw std::runtime_error("pg_ctl start failed: " + start.describe());
  started_ = true;
}

PgCluster::~PgCluster() {
  if (started_) {
    std::vector<std::string> argv{bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"};
    if (as_nobody_) argv.insert(argv.begin(), {"runuser", "-u", "nobody", "--"});
    (void)run_command(argv, {}, 60s);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string PgCluster::url(const std::string& database) const {
  return "postgresql:///" + database + "?host=" + dir_ + "&port=" + std::to_string(port_) + "&user=faultcp";
}

std::string PgCluster::create_database(const std::string& name) {
  auto admin = faultline::cp::open_postgres(url("postgres"));
  if (!admin) throw std::runtime_error(admin.error().describe());
  auto r = (*admin)->query("CREATE DATABASE " + name);
  if (!r) throw std::runtime_error(r.error().describe());
  return url(name);
}

PgCluster& shared_pg_cluster() {
  static PgCluster cluster;
  return cluster;
}

}  // namespace fltest
