// What the Kubernetes gate's suites share: where kubectl is.
#pragma once

#include <unistd.h>

#include <string>

namespace fltest {

// Debian's kubernetes-client, or a kubectl installed by hand; "" when none.
inline std::string kubectl_path() {
  for (const char* p : {"/usr/bin/kubectl", "/usr/local/bin/kubectl"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

}  // namespace fltest
