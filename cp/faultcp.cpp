// faultcp: the control plane. `faultcp serve` opens the database (migrating
// it), listens, and serves the API until SIGTERM or SIGINT.
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <string>

#include "base/unique_fd.h"
#include "base/version.h"
#include "cp/api/control_plane.h"
#include "cp/storage/store.h"
#include "userspace/net/http_server.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/proposer.h"

namespace {

constexpr const char* kDefaultListen = "127.0.0.1:8470";
constexpr const char* kDefaultDatabase = "sqlite:/var/lib/faultcp/faultcp.db";

constexpr const char* kUsage =
    R"(usage: faultcp serve [--listen HOST:PORT] [--database URL] [--tls-cert PEM --tls-key PEM] [options]
       faultcp version

Serves the control plane's REST API (docs/control-plane.md).

  --listen HOST:PORT      where to listen (default 127.0.0.1:8470; [::1]:8470 for IPv6)
  --database URL          sqlite:PATH (default sqlite:/var/lib/faultcp/faultcp.db; its folder
                          is created, mode 0700, if missing)
                          or postgres://USER@HOST:PORT/DB (any libpq URI)
  --tls-cert PEM          serve HTTPS with this certificate chain (with --tls-key)
  --tls-key PEM           the certificate's private key
  --poll-timeout-ms N     how long an agent's long poll is held (default 25000)
  --lease-ms N            how long a dispatched experiment waits for its agent
                          to start it before it fails (default 60000)
  --prometheus-url URL    where the services' SLO series are read (GET
                          /v1/services/{id}/slo, POST /v1/validate); without it
                          they answer that no Prometheus is set
  --prometheus-timeout-ms N  how long one query may take (default 2000, 100-10000;
                          it holds the serving thread meanwhile)
  --schedule-grace-s N    a schedule's firing later than this (faultcp was down) is
                          not made up: recorded skipped, code missed (default 60,
                          1-86400; docs/orchestration.md#schedules)
  --proposer MODE         off (default), shadow or approve: the LLM proposer
                          (POST /v1/proposals/run; docs/orchestration.md#the-proposer)
  --proposer-provider P   anthropic or openai (required with shadow/approve)
  --proposer-url URL      the provider's base URL (https://api.anthropic.com,
                          https://api.openai.com)
  --proposer-model NAME   the model asked
  --proposer-key-file F   a file holding the provider's API key (its first line)

EXAMPLES
  faultcp serve
  faultcp serve --listen 0.0.0.0:8470 --database postgres://faultcp@db.internal/faultcp
)";

// --proposer and its model: every flag checked, none taken and ignored
// (a --proposer-* flag with --proposer off is refused). 0, or the exit code.
int configure_proposer(const cxxopts::ParseResult& args, faultline::cp::ControlPlaneConfig& config) {
  const auto mode = faultline::parse_proposer_mode(args["proposer"].as<std::string>());
  if (!mode) {
    std::fprintf(stderr, "faultcp serve: --proposer must be off, shadow or approve\n");
    return 2;
  }
  const char* flags[] = {"proposer-provider", "proposer-url", "proposer-model", "proposer-key-file"};
  if (*mode == faultline::ProposerMode::Off) {
    for (const char* f : flags)
      if (args.count(f)) {
        std::fprintf(stderr, "faultcp serve: --%s needs --proposer shadow or approve\n", f);
        return 2;
      }
    return 0;
  }
  for (const char* f : flags)
    if (!args.count(f)) {
      std::fprintf(stderr, "faultcp serve: --proposer %s needs --%s\n", args["proposer"].as<std::string>().c_str(), f);
      return 2;
    }
  faultline::ProposerConfig pc;
  pc.mode = *mode;
  const auto provider = faultline::parse_model_provider(args["proposer-provider"].as<std::string>());
  if (!provider) {
    std::fprintf(stderr, "faultcp serve: --proposer-provider must be anthropic or openai\n");
    return 2;
  }
  pc.provider = *provider;
  pc.url = args["proposer-url"].as<std::string>();
  pc.model = args["proposer-model"].as<std::string>();
  if (pc.model.empty() || pc.model.size() > 200) {
    std::fprintf(stderr, "faultcp serve: --proposer-model must be 1-200 characters\n");
    return 2;
  }
  const std::string key_file = args["proposer-key-file"].as<std::string>();
  std::ifstream in(key_file);
  if (!in) {
    std::fprintf(stderr, "faultcp serve: --proposer-key-file: cannot read %s\n", key_file.c_str());
    return 2;
  }
  std::getline(in, pc.api_key);
  while (!pc.api_key.empty() && (pc.api_key.back() == '\r' || pc.api_key.back() == ' ')) pc.api_key.pop_back();
  if (pc.api_key.empty() || pc.api_key.find_first_of("\r\n\t ") != std::string::npos) {
    std::fprintf(stderr, "faultcp serve: --proposer-key-file: %s holds no key on its first line\n", key_file.c_str());
    return 2;
  }
  auto transport = faultline::http_model_transport(pc);
  if (!transport) {
    std::fprintf(stderr, "faultcp serve: --proposer-url: %s\n", transport.error().describe().c_str());
    return 2;
  }
  config.proposer = std::make_shared<faultline::LlmProposer>(pc, std::move(*transport));
  return 0;
}

int serve(int argc, char** argv) {
  cxxopts::Options o("faultcp serve", "");
  o.add_options()("listen", "", cxxopts::value<std::string>()->default_value(kDefaultListen))(
      "database", "", cxxopts::value<std::string>()->default_value(kDefaultDatabase))(
      "poll-timeout-ms", "", cxxopts::value<int64_t>()->default_value("25000"))(
      "lease-ms", "", cxxopts::value<int64_t>()->default_value("60000"))("tls-cert", "", cxxopts::value<std::string>())(
      "tls-key", "", cxxopts::value<std::string>())("prometheus-url", "", cxxopts::value<std::string>())(
      "prometheus-timeout-ms", "", cxxopts::value<int64_t>()->default_value("2000"))(
      "schedule-grace-s", "", cxxopts::value<int64_t>()->default_value("60"))(
      "proposer", "", cxxopts::value<std::string>()->default_value("off"))(
      "proposer-provider", "", cxxopts::value<std::string>())("proposer-url", "", cxxopts::value<std::string>())(
      "proposer-model", "", cxxopts::value<std::string>())("proposer-key-file", "", cxxopts::value<std::string>())(
      "h,help", "");
  cxxopts::ParseResult args;
  try {
    args = o.parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "faultcp serve: %s\n", e.what());
    return 2;
  }
  if (args.count("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!args.unmatched().empty()) {
    std::fprintf(stderr, "faultcp serve: unexpected argument '%s'\n", args.unmatched().front().c_str());
    return 2;
  }
  faultline::cp::ControlPlaneConfig config;
  const int64_t poll = args["poll-timeout-ms"].as<int64_t>(), lease = args["lease-ms"].as<int64_t>();
  if (poll < 0 || poll > 600'000) {
    std::fprintf(stderr, "faultcp serve: --poll-timeout-ms must be within 0-600000\n");
    return 2;
  }
  if (lease < 1000 || lease > 86'400'000) {
    std::fprintf(stderr, "faultcp serve: --lease-ms must be within 1000-86400000\n");
    return 2;
  }
  config.poll_timeout = std::chrono::milliseconds(poll);
  config.lease = std::chrono::milliseconds(lease);
  const int64_t prom_timeout = args["prometheus-timeout-ms"].as<int64_t>();
  if (prom_timeout < 100 || prom_timeout > 10'000) {
    std::fprintf(stderr, "faultcp serve: --prometheus-timeout-ms must be within 100-10000\n");
    return 2;
  }
  if (args.count("prometheus-url")) {
    auto prom = faultline::prometheus_query(args["prometheus-url"].as<std::string>(),
                                            static_cast<uint64_t>(prom_timeout) * 1'000'000ULL);
    if (!prom) {
      std::fprintf(stderr, "faultcp serve: %s\n", prom.error().describe().c_str());
      return 2;
    }
    config.prometheus = std::move(*prom);
  }

  const int64_t grace = args["schedule-grace-s"].as<int64_t>();
  if (grace < 1 || grace > 86'400) {
    std::fprintf(stderr, "faultcp serve: --schedule-grace-s must be within 1-86400\n");
    return 2;
  }
  config.schedule_grace = std::chrono::seconds(grace);

  if (auto code = configure_proposer(args, config); code != 0) return code;

  if (args.count("tls-cert") != args.count("tls-key")) {
    std::fprintf(stderr, "faultcp serve: --tls-cert and --tls-key go together\n");
    return 2;
  }
  std::shared_ptr<faultline::HttpTlsContext> tls;
  if (args.count("tls-cert")) {
    auto loaded =
        faultline::HttpTlsContext::load(args["tls-cert"].as<std::string>(), args["tls-key"].as<std::string>());
    if (!loaded) {
      std::fprintf(stderr, "faultcp serve: %s\n", loaded.error().describe().c_str());
      return 2;
    }
    tls = *loaded;
  }
  const std::string database = args["database"].as<std::string>();
  // Everything faultcp creates (the SQLite file, its WAL) is its own alone.
  ::umask(0077);
  if (database.rfind("sqlite:", 0) == 0) {
    // The database's folder, one level, private: the file holds password hashes.
    const std::string path = database.substr(7);
    const auto slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0 && ::mkdir(path.substr(0, slash).c_str(), 0700) != 0 &&
        errno != EEXIST) {
      std::fprintf(stderr, "faultcp serve: --database: cannot create %s: %s\n", path.substr(0, slash).c_str(),
                   std::strerror(errno));
      return 1;
    }
  }
  auto store = faultline::cp::Store::open(database);
  if (!store) {
    std::fprintf(stderr, "faultcp serve: --database: %s\n", store.error().describe().c_str());
    return store.error().bad_input ? 2 : 1;
  }
  // Every agent holds a connection: the soft limit of 1024 descriptors is
  // raised to the hard one, and the connection cap stays under it.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);
  }
  faultline::HttpServerLimits limits;
  limits.request.max_body = config.max_body;
  // A long poll holds its connection quiet for poll_timeout: idle means longer.
  limits.idle_timeout = std::max(limits.idle_timeout, config.poll_timeout + std::chrono::seconds(30));
  limits.max_connections = ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur > 1064
                               ? std::min<size_t>(65536, files.rlim_cur - 64)
                               : 960;
  auto server = faultline::HttpServer::create(limits);
  if (!server) {
    std::fprintf(stderr, "faultcp serve: %s\n", server.error().describe().c_str());
    return 1;
  }
  faultline::cp::ControlPlane api(**store, *server, config);
  auto bound = tls ? server->listen_tls(args["listen"].as<std::string>(), api.handler(), tls)
                   : server->listen_tcp(args["listen"].as<std::string>(), api.handler());
  if (!bound) {
    std::fprintf(stderr, "faultcp serve: --listen: %s\n", bound.error().describe().c_str());
    return bound.error().bad_input ? 2 : 1;
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  faultline::UniqueFd stop(signalfd(-1, &mask, SFD_CLOEXEC));
  ::signal(SIGPIPE, SIG_IGN);
  if (auto started = api.start(); !started) {
    std::fprintf(stderr, "faultcp serve: %s\n", started.error().describe().c_str());
    return 1;
  }
  const std::string backend = database.rfind("sqlite:", 0) == 0 ? database : "postgres";
  std::printf("faultcp: listening on %s%s (database %s, schema version %lld)\n", bound->c_str(), tls ? " with TLS" : "",
              backend.c_str(), static_cast<long long>((*store)->schema_version().value_or(0)));
  std::fflush(stdout);
  auto ran = server->run(stop.get());
  if (!ran) {
    std::fprintf(stderr, "faultcp serve: %s\n", ran.error().describe().c_str());
    return 1;
  }
  std::printf("faultcp: stopped\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "serve") return serve(argc - 1, argv + 1);
  if (argc == 2 && (std::string(argv[1]) == "version" || std::string(argv[1]) == "--version")) {
    std::printf("faultcp %s\n", faultline::version_string());
    return 0;
  }
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fputs(kUsage, stderr);
  return 2;
}
