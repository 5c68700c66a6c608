// The command skeleton's out-of-line part.
#include "ctl/command.h"

#include <algorithm>

namespace faultline {

bool has_flag(const std::vector<std::string>& args, const std::string& f) {
  return std::find(args.begin(), args.end(), f) != args.end();
}

bool only_flags(const std::string& cmd, const std::vector<std::string>& args, const std::vector<std::string>& known) {
  for (const auto& a : args) {
    if (std::find(known.begin(), known.end(), a) == known.end()) {
      std::cerr << "faultctl " << cmd << ": unknown argument '" << a << "'\n";
      return false;
    }
  }
  return true;
}

int report_error(std::string_view who, const Error& e) {
  std::cerr << who << ": " << e.describe() << "\n";
  return e.bad_input ? kExitBadInput : kExitFailure;
}

}  // namespace faultline
