// The words of a command line as cxxopts sees them: the flags, and for the
// commands that wrap one, the command after "--".
#pragma once

#include <cxxopts.hpp>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

// Every long flag of a command's options -> whether it takes a value (false: a
// switch). Read from the options themselves, for the checks of experiments
// written as data (a policy's spec.faults), not from their --help text.
using FlagTable = std::map<std::string, bool>;
[[nodiscard]] FlagTable flag_table(const cxxopts::Options& o);

// "faultctl guard FLAGS -- COMMAND ARGS": the words before the first "--", and after it.
struct FlagsAndCommand {
  std::vector<std::string> flags;
  std::vector<std::string> command;
};
[[nodiscard]] FlagsAndCommand split_command(const std::vector<std::string>& args);

// The stray-word hint of the commands that wrap one (guard, run syscall).
inline constexpr std::string_view kCommandAfterDashesHint = "(put the command after --)";

// Parses the words after the command's name with o. A parse error or a stray word
// is one line of bad input naming it; stray_hint, if any, follows the stray word.
[[nodiscard]] Result<cxxopts::ParseResult> parse_flag_words(cxxopts::Options& o, const std::vector<std::string>& words,
                                                            std::string_view stray_hint = {});

}  // namespace faultline
