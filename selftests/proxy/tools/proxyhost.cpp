// fl-proxyhost: one proxy in a process of its own, as faultd would run it, for
// measuring what the proxy alone costs (RSS per idle connection; TLS req/s in
// make bench, scripts/bench-proxy.sh).
//
//   fl-proxyhost UPSTREAM [ring|plain] [sni | terminate CA_DIR UPSTREAM_CA]
//
// sni: HTTP mode with TLS pass-through and a delay fault whose SNI matches no
// client (the cost of the ClientHello scan and the decision); terminate: TLS
// ended with a leaf of the CA in CA_DIR (created if missing), the upstream
// verified against UPSTREAM_CA, a status fault whose path matches nothing.
//
// Prints "listen HOST:PORT" once the proxy listens, then runs until stdin closes.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "userspace/proxy/proxy_registry.h"
#include "userspace/proxy/tls_ca.h"
#include "userspace/proxy/tls_leaf_cache.h"
#include "userspace/proxy/tls_session.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fl-proxyhost UPSTREAM [ring|plain]\n");
    return 2;
  }
  // Two descriptors per proxied connection: as many as the hard limit allows.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  faultline::ProxyOptions options;
  if (argc > 2)
    options.receive =
        std::strcmp(argv[2], "plain") == 0 ? faultline::ReceiveMode::plain : faultline::ReceiveMode::buffer_ring;
  auto reg = faultline::ProxyRegistry::start(options);
  if (!reg) {
    std::fprintf(stderr, "fl-proxyhost: %s\n", reg.error().describe().c_str());
    return 1;
  }
  auto info = (*reg)->create({"host", "127.0.0.1:0", argv[1], true});
  if (!info) {
    std::fprintf(stderr, "fl-proxyhost: %s\n", info.error().describe().c_str());
    return 1;
  }
  if (argc > 3) {
    faultline::HttpTls tls;
    faultline::HttpFault never;
    if (std::strcmp(argv[3], "sni") == 0) {
      tls.mode = faultline::HttpTlsMode::sni;
      never.name = "never";
      never.type = faultline::HttpFaultType::delay;
      never.delay_ms = 1000;
      never.match.host = "never.invalid";
    } else if (std::strcmp(argv[3], "terminate") == 0 && argc > 5) {
      auto ca = faultline::open_or_create_ca(faultline::CaFiles{argv[4]});
      if (!ca) {
        std::fprintf(stderr, "fl-proxyhost: %s\n", ca.error().describe().c_str());
        return 1;
      }
      auto server = faultline::TlsServerContext::create(
          std::make_shared<faultline::LeafCache>(std::make_shared<faultline::CertificateAuthority>(std::move(ca->ca))));
      faultline::TlsClientOptions o;
      o.upstream_ca_file = argv[5];
      auto client = faultline::TlsClientContext::create(o);
      if (!server || !client) {
        std::fprintf(stderr, "fl-proxyhost: %s\n", (!server ? server.error() : client.error()).describe().c_str());
        return 1;
      }
      tls.mode = faultline::HttpTlsMode::terminate;
      tls.server = *server;
      tls.client = *client;
      never.name = "never";
      never.type = faultline::HttpFaultType::status;
      never.status = 503;
      never.match.path = "/never";
    } else {
      std::fprintf(stderr, "usage: fl-proxyhost UPSTREAM [ring|plain] [sni | terminate CA_DIR UPSTREAM_CA]\n");
      return 2;
    }
    if (auto st = (*reg)->set_http_tls("host", tls); !st) {
      std::fprintf(stderr, "fl-proxyhost: %s\n", st.error().describe().c_str());
      return 1;
    }
    if (auto added = (*reg)->add_http_fault("host", never); !added) {
      std::fprintf(stderr, "fl-proxyhost: %s\n", added.error().describe().c_str());
      return 1;
    }
  }
  std::printf("listen %s\n", info->listen_bound.c_str());
  std::fflush(stdout);
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}
