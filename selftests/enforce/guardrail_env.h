// What the guardrail tests stand on, all on loopback and all removed when the
// test ends: a tiny HTTP server with a handler, a real Prometheus server (the
// `prometheus` binary, scraping an exporter the test serves), and a throw-away
// CA with server certificates (made by the openssl CLI).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "enforce_env.h"

namespace flenf {

// The JSON lines of a faultctl --json run that carry an "event", in order.
[[nodiscard]] std::vector<nlohmann::json> json_events(const std::string& out);
// The first event of that name.
[[nodiscard]] std::optional<nlohmann::json> json_event(const std::string& out, const std::string& name);
// Every event of that name.
[[nodiscard]] std::vector<nlohmann::json> json_events_named(const std::string& out, const std::string& name);

// Whether a program is on PATH.
[[nodiscard]] bool on_path(const std::string& program);

// A free TCP port on 127.0.0.1 at the time of the call (bound, then closed).
[[nodiscard]] uint16_t free_loopback_port();

// Waits until something accepts on 127.0.0.1:port; false at the deadline.
[[nodiscard]] bool wait_for_listener(uint16_t port, Millis timeout);

// An HTTP/1.1 server on 127.0.0.1: each connection's request is read to its
// blank line, answered with handler(path) (the whole response, head and body)
// and closed. Serves on a thread until destroyed.
class HttpResponder {
 public:
  using Handler = std::function<std::string(const std::string& path)>;
  explicit HttpResponder(Handler handler);
  ~HttpResponder();
  HttpResponder(const HttpResponder&) = delete;
  HttpResponder& operator=(const HttpResponder&) = delete;
  [[nodiscard]] uint16_t port() const { return port_; }
  [[nodiscard]] long requests() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
  uint16_t port_ = 0;
};

// "HTTP/1.1 <status>\r\nContent-Length: ...\r\n\r\n<body>", with extra header lines.
[[nodiscard]] std::string http_response(const std::string& status, const std::string& body,
                                        const std::string& headers = "");

// A Prometheus exposition endpoint (/metrics) whose text the test sets.
class Exporter {
 public:
  Exporter();
  void set(const std::string& exposition);
  [[nodiscard]] uint16_t port() const { return http_.port(); }

 private:
  struct Text;
  std::shared_ptr<Text> text_;
  HttpResponder http_;
};

// A real Prometheus on 127.0.0.1 with a private port and TSDB in dir, scraping
// the exporter every second (evaluation every second too). No lifecycle or
// admin API. Stopped (SIGTERM, then SIGKILL) when destroyed. `rules`, when
// given, is a rule file's YAML (groups: ...), evaluated every second (the
// orchestration's tests record their slo:* series with it).
class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, uint16_t exporter_port, const std::string& rules = "");
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  // /-/ready answered 200; false (with the log) when it did not in time.
  [[nodiscard]] bool wait_ready(Millis timeout);
  // An instant query answers `value` (the exporter was scraped since it changed).
  [[nodiscard]] bool wait_for_value(const std::string& query, double value, Millis timeout);
  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] pid_t pid() const;
  // SIGTERM and wait for it to exit: the port then refuses.
  void stop();
  [[nodiscard]] std::string log() const;

 private:
  std::string dir_;
  uint16_t port_;
  std::optional<ChildProcess> proc_;
};

// A CA made for the test and server certificates signed by it (EC P-256, one
// day), under dir. cert(name) is "<dir>/<name>.pem" with its key "<dir>/<name>.key".
class TestCa {
 public:
  explicit TestCa(const std::string& dir);
  [[nodiscard]] const std::string& ca_pem() const { return ca_pem_; }
  // A server certificate for the given subjectAltName ("DNS:localhost,IP:127.0.0.1").
  void issue(const std::string& name, const std::string& subject_alt_names) const;
  [[nodiscard]] std::string cert(const std::string& name) const { return dir_ + "/" + name + ".pem"; }
  [[nodiscard]] std::string key(const std::string& name) const { return dir_ + "/" + name + ".key"; }

 private:
  std::string dir_, ca_pem_;
};

// `openssl s_server -www` on 127.0.0.1 with a certificate: any GET gets 200.
class TlsServer {
 public:
  TlsServer(const std::string& cert, const std::string& key);
  [[nodiscard]] uint16_t port() const { return port_; }

 private:
  uint16_t port_;
  std::optional<ChildProcess> proc_;
};

}  // namespace flenf
