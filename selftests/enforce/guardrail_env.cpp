// The guardrail tests' servers: a handler-driven HTTP responder, an exporter on
// it, a real Prometheus, and a test CA with `openssl s_server`.
#include "guardrail_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "userspace/guardrails/http_client.h"
#include "userspace/guardrails/prometheus.h"

namespace flenf {
namespace {

int loopback_listener(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 128) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// Runs a command to its end; throws with its output when it fails.
void must_run(const std::vector<std::string>& argv) {
  CommandResult o = run(argv, 30s);
  if (!o.status.is(0)) throw std::runtime_error("failed: " + o.describe());
}

// argv as one sh command that execs it with its output in `log`: a server's
// output must not fill a pipe nobody reads.
std::vector<std::string> exec_logged(const std::vector<std::string>& argv, const std::string& log) {
  std::string cmd = "exec";
  for (const auto& a : argv) cmd += " '" + a + "'";
  cmd += " >>'" + log + "' 2>&1";
  return {"/bin/sh", "-c", cmd};
}

}  // namespace

std::vector<nlohmann::json> json_events(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("event")) v.push_back(j);
  }
  return v;
}

std::optional<nlohmann::json> json_event(const std::string& out, const std::string& name) {
  for (const auto& j : json_events(out)) {
    if (j.value("event", "") == name) return j;
  }
  return std::nullopt;
}

std::vector<nlohmann::json> json_events_named(const std::string& out, const std::string& name) {
  std::vector<nlohmann::json> v;
  for (const auto& j : json_events(out)) {
    if (j.value("event", "") == name) v.push_back(j);
  }
  return v;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (::access((d + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

uint16_t free_loopback_port() {
  uint16_t port = 0;
  ::close(loopback_listener(&port));
  return port;
}

bool wait_for_listener(uint16_t port, Millis timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::string http_response(const std::string& status, const std::string& body, const std::string& headers) {
  return "HTTP/1.1 " + status + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + headers +
         "Connection: close\r\n\r\n" + body;
}

struct HttpResponder::State {
  int fd = -1;
  Handler handler;
  std::atomic<bool> stop{false};
  std::atomic<long> requests{0};
  std::thread th;
};

HttpResponder::HttpResponder(Handler handler) : s_(std::make_shared<State>()) {
  s_->handler = std::move(handler);
  s_->fd = loopback_listener(&port_);
  s_->th = std::thread([s = s_] {
    while (!s->stop.load()) {
      pollfd p{s->fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(s->fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      timeval tv{2, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos && req.size() < 65536) {
        ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      // "GET /path HTTP/1.1"
      auto sp1 = req.find(' '), sp2 = req.find(' ', sp1 + 1);
      if (sp1 != std::string::npos && sp2 != std::string::npos) {
        s->requests++;
        std::string resp = s->handler(req.substr(sp1 + 1, sp2 - sp1 - 1));
        for (size_t sent = 0; sent < resp.size();) {
          ssize_t n = ::send(c, resp.data() + sent, resp.size() - sent, MSG_NOSIGNAL);
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
      }
      ::close(c);
    }
  });
}

HttpResponder::~HttpResponder() {
  s_->stop = true;
  s_->th.join();
  ::close(s_->fd);
}

long HttpResponder::requests() const { return s_->requests.load(); }

struct Exporter::Text {
  std::mutex mu;
  std::string exposition;
};

Exporter::Exporter()
    : text_(std::make_shared<Text>()), http_([t = text_](const std::string& path) {
        if (path != "/metrics") return http_response("404 Not Found", "not here\n");
        std::lock_guard<std::mutex> l(t->mu);
        return http_response("200 OK", t->exposition, "Content-Type: text/plain; version=0.0.4\r\n");
      }) {}

void Exporter::set(const std::string& exposition) {
  std::lock_guard<std::mutex> l(text_->mu);
  text_->exposition = exposition;
}

PrometheusServer::PrometheusServer(const std::string& dir, uint16_t exporter_port, const std::string& rules)
    : dir_(dir) {
  std::filesystem::create_directories(dir_ + "/data");
  if (!rules.empty()) std::ofstream(dir_ + "/rules.yml") << rules;
  std::ofstream(dir_ + "/prometheus.yml")
      << (rules.empty() ? "" : "rule_files: ['" + dir_ + "/rules.yml']\n") << "global:\n"
      << "  scrape_interval: 1s\n"
      << "  scrape_timeout: 900ms\n"
      << "  evaluation_interval: 1s\n"
      << "scrape_configs:\n"
      << "  - job_name: faultline_test\n"
      << "    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << exporter_port << "']\n";
  port_ = free_loopback_port();
  proc_.emplace(ChildProcess::spawn(
      exec_logged({"prometheus", "--config.file=" + dir_ + "/prometheus.yml", "--storage.tsdb.path=" + dir_ + "/data",
                   "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"},
                  dir_ + "/prometheus.log")));
}

PrometheusServer::~PrometheusServer() { stop(); }

pid_t PrometheusServer::pid() const { return proc_ ? proc_->pid() : -1; }

void PrometheusServer::stop() {
  if (!proc_) return;
  ::kill(proc_->pid(), SIGTERM);
  if (!proc_->wait(15s)) proc_->stop();
  proc_.reset();
}

std::string PrometheusServer::log() const {
  std::ifstream in(dir_ + "/prometheus.log");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool PrometheusServer::wait_ready(Millis timeout) {
  auto client = faultline::HttpClient::create({});
  auto ready = faultline::parse_http_url(url() + "/-/ready");
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    auto a = client->get(*ready, 1'000'000'000ULL);
    if (a && a->response.status.code == 200) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

bool PrometheusServer::wait_for_value(const std::string& query, double value, Millis timeout) {
  auto client = faultline::PrometheusClient::create({url(), ""});
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    auto s = client->query(query, 1'000'000'000ULL);
    if (s && std::fabs(s->value - value) < 1e-9) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

TestCa::TestCa(const std::string& dir) : dir_(dir), ca_pem_(dir + "/ca.pem") {
  std::filesystem::create_directories(dir_);
  must_run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            dir_ + "/ca.key", "-out", ca_pem_, "-days", "1", "-subj", "/CN=Faultline test CA"});
}

void TestCa::issue(const std::string& name, const std::string& subject_alt_names) const {
  const std::string ext = dir_ + "/" + name + ".ext";
  std::ofstream(ext) << "subjectAltName=" << subject_alt_names << "\n"
                     << "basicConstraints=CA:FALSE\n"
                     << "extendedKeyUsage=serverAuth\n";
  must_run({"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            key(name), "-out", dir_ + "/" + name + ".csr", "-subj", "/CN=" + name});
  must_run({"openssl", "x509", "-req", "-in", dir_ + "/" + name + ".csr", "-CA", ca_pem_, "-CAkey", dir_ + "/ca.key",
            "-CAcreateserial", "-out", cert(name), "-days", "1", "-extfile", ext});
}

TlsServer::TlsServer(const std::string& cert, const std::string& key) : port_(free_loopback_port()) {
  proc_.emplace(ChildProcess::spawn(exec_logged({"openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port_),
                                                 "-cert", cert, "-key", key, "-www", "-quiet"},
                                                "/dev/null")));
  if (!wait_for_listener(port_, 10s)) throw std::runtime_error("openssl s_server did not listen");
}

}  // namespace flenf
