// The command skeleton's out-of-line parts.
#include "ctl/command.h"

#include <algorithm>

#include "ctl/flag_error.h"

namespace faultline {

bool Switches::has(std::string_view s) const { return std::find(given.begin(), given.end(), s) != given.end(); }

Result<Parsed<Switches>> parse_switches(const std::vector<std::string>& args,
                                        std::initializer_list<std::string_view> known, std::string help) {
  Switches s;
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") return Parsed<Switches>(HelpText{std::move(help)});
    if (std::find(known.begin(), known.end(), a) == known.end()) return bad("unknown argument '" + a + "'");
    s.given.push_back(a);
  }
  return Parsed<Switches>(std::move(s));
}

int report_error(std::string_view who, const Error& e) {
  std::cerr << who << ": " << e.describe() << "\n";
  return e.bad_input ? kExitBadInput : kExitFailure;
}

}  // namespace faultline
