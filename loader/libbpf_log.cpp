// libbpf print callback controlled by the environment.
#include "loader/libbpf_log.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace faultline {
namespace {

int level_limit = -1;  // -1: silent

int print(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (static_cast<int>(level) > level_limit) return 0;
  return std::vfprintf(stderr, fmt, args);
}

}  // namespace

void configure_libbpf_log() {
  const char* v = std::getenv("FAULTLINE_LIBBPF_LOG");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0)
    level_limit = -1;
  else if (std::strcmp(v, "debug") == 0)
    level_limit = LIBBPF_DEBUG;
  else
    level_limit = LIBBPF_INFO;
  libbpf_set_print(print);
}

}  // namespace faultline
