#include "userspace/state/kill_switch.h"

#include <unistd.h>

#include <cstdlib>

#include "userspace/state/state_dir.h"

namespace faultline {

std::string kill_file_path() {
  const char* f = std::getenv("FAULTLINE_KILL_FILE");
  return f != nullptr && *f != '\0' ? std::string(f) : state_root() + "/kill";
}

bool kill_file_present() { return ::access(kill_file_path().c_str(), F_OK) == 0; }

std::optional<std::string> fault_start_refused() {
  if (const char* d = std::getenv("FAULTLINE_DISABLED"); d != nullptr) {
    std::string v = d;
    if (!v.empty() && v != "0" && v != "false" && v != "no")
      return "FAULTLINE_DISABLED=" + v + " is set: no fault may start (unset it, or set it to 0, to allow faults)";
  }
  if (kill_file_present())
    return "the kill file " + kill_file_path() +
           " exists: no fault may start while it does (remove it to allow faults)";
  return std::nullopt;
}

}  // namespace faultline
