// What a faultctl parser returns: the command's arguments, or its --help.
#pragma once

#include <string>
#include <variant>

namespace faultline {

// The text --help prints on stdout (exit 0). Asking for help is not an error.
struct HelpText {
  std::string text;
};

// The outcome of a successful parse: what to run, or the help asked for.
template <typename Args>
using Parsed = std::variant<Args, HelpText>;

}  // namespace faultline
