#include "base/run_dir.h"

#include <cstdlib>

namespace faultline {

std::string state_root() {
  const char* r = std::getenv("FAULTLINE_RUN_DIR");
  std::string root = r != nullptr && *r != '\0' ? r : "/run/faultline";
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root;
}

}  // namespace faultline
