// A self-signed certificate for a TLS server a test starts on 127.0.0.1
// (faultcp, a webhook receiver): EC P-256, valid one day, subjectAltName
// IP:127.0.0.1, made by the openssl command.
#pragma once

#include <string>

#include "selftests/lib/child_process.h"

namespace fltest {

// Writes the certificate to cert_path and its key to key_path; the result
// says why openssl failed.
[[nodiscard]] CommandResult make_self_signed_cert(const std::string& cert_path, const std::string& key_path,
                                                  const std::string& common_name);

}  // namespace fltest
