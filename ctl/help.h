// What a faultctl parser returns: the command's arguments, or its --help; and
// the EXAMPLES block every --help ends with.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <variant>

namespace faultline {

// The text --help prints on stdout (exit 0). Asking for help is not an error.
struct HelpText {
  std::string text;
};

// The outcome of a successful parse: what to run, or the help asked for.
template <typename Args>
using Parsed = std::variant<Args, HelpText>;

// One example of a --help: what it does, and the command line that does it.
struct Example {
  std::string_view what;
  std::string_view command;
};

// usage, then an EXAMPLES block as libbpf-tools' tools end theirs: each example
// a "# what" line over its command, which is wrapped with " \" past 80 columns,
// so that it pastes into a shell as it stands.
[[nodiscard]] std::string with_examples(std::string usage, std::span<const Example> examples);

}  // namespace faultline
