// The one shape of a faultctl command: parse its words, answer --help, check for
// root, run. Each file in ctl/commands/ is this shape plus what is its own.
#pragma once

#include <unistd.h>

#include <initializer_list>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/exit_code.h"
#include "base/result.h"
#include "ctl/help.h"

namespace faultline {

// When a command needs root, and the line it prints without it ("WHO: WHY", exit 1).
struct RootNeed {
  enum class When { Never, Always, UnlessDryRun };
  When when = When::Never;
  std::string_view why;
};
inline constexpr RootNeed kRootNever{};

// The words of a command whose arguments are switches alone (status --json):
// which of `known` were given. -h or --help is the help; any other word is bad input.
struct Switches {
  std::vector<std::string> given;
  [[nodiscard]] bool has(std::string_view s) const;
};
[[nodiscard]] Result<Parsed<Switches>> parse_switches(const std::vector<std::string>& args,
                                                      std::initializer_list<std::string_view> known, std::string help);

// "WHO: what went wrong" on stderr; the exit code: 2 if the error is bad input, else 1.
[[nodiscard]] int report_error(std::string_view who, const Error& e);

template <typename Args>
[[nodiscard]] bool root_needed(const RootNeed& root, const Args& args) {
  switch (root.when) {
    case RootNeed::When::Never:
      return false;
    case RootNeed::When::Always:
      return true;
    case RootNeed::When::UnlessDryRun:
      if constexpr (requires { args.flags.dry_run; }) {
        return !args.flags.dry_run;
      } else {
        return true;
      }
  }
  return true;
}

// parse -> --help -> root check -> body(args). A parse error is bad input
// whatever its errno: its message goes to stderr after "WHO: ", exit 2. who is
// the command as typed ("faultctl run syscall"); body returns the exit code.
template <typename Args, typename Body>
[[nodiscard]] int run_command(std::string_view who, Result<Parsed<Args>> parsed, const RootNeed& root, Body&& body) {
  if (!parsed) {
    std::cerr << who << ": " << parsed.error().message << "\n";
    return kExitBadInput;
  }
  if (const auto* help = std::get_if<HelpText>(&*parsed)) {
    std::cout << help->text;
    return kExitCompleted;
  }
  Args& args = std::get<Args>(*parsed);
  if (root_needed(root, args) && ::geteuid() != 0) {
    std::cerr << who << ": " << root.why << "\n";
    return kExitFailure;
  }
  return std::forward<Body>(body)(args);
}

}  // namespace faultline
