#include "selftests/lib/test_cert.h"

#include <chrono>

namespace fltest {

CommandResult make_self_signed_cert(const std::string& cert_path, const std::string& key_path,
                                    const std::string& common_name) {
  using namespace std::chrono_literals;
  return run_command(
      {"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
       "-subj", "/CN=" + common_name, "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key_path, "-out", cert_path},
      {}, 30s);
}

}  // namespace fltest
