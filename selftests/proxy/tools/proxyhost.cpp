// fl-proxyhost: one proxy in a process of its own, as faultd would run it, for
// measuring what the proxy alone costs (RSS per idle connection).
//
//   fl-proxyhost UPSTREAM [ring|plain]
//
// Prints "listen HOST:PORT" once the proxy listens, then runs until stdin closes.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "userspace/proxy/proxy_registry.h"

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
  std::printf("listen %s\n", info->listen_bound.c_str());
  std::fflush(stdout);
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {
  }
  return 0;
}
