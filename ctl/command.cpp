// The command skeleton's out-of-line part.
#include "ctl/command.h"

namespace faultline {

int report_error(std::string_view who, const Error& e) {
  std::cerr << who << ": " << e.describe() << "\n";
  return e.bad_input ? kExitBadInput : kExitFailure;
}

}  // namespace faultline
