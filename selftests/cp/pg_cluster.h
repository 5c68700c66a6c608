// A throw-away PostgreSQL cluster for the tests: Debian's initdb and pg_ctl
// (/usr/lib/postgresql/*/bin), run as `nobody` when the tests run as root
// (PostgreSQL refuses to run as root), listening only on a unix socket in a
// private directory on a free port number. Stopped and deleted when it goes.
#pragma once

#include <string>

namespace fltest {

class PgCluster {
 public:
  // Starts a cluster; throws std::runtime_error with initdb's or pg_ctl's
  // output if it cannot.
  PgCluster();
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // A fresh, empty database; returns its postgres:// URL.
  [[nodiscard]] std::string create_database(const std::string& name);
  [[nodiscard]] std::string url(const std::string& database) const;
  [[nodiscard]] const std::string& bin_dir() const { return bin_; }

 private:
  std::string bin_;  // /usr/lib/postgresql/15/bin
  std::string dir_;  // the socket directory; the data in dir_/data
  int port_ = 0;
  bool as_nobody_ = false;
  bool started_ = false;
};

// The process-wide cluster of a test binary, started on first use.
PgCluster& shared_pg_cluster();

}  // namespace fltest
