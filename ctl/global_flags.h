// faultctl's flags before the command: which control plane (faultcp) to ask.
//   faultctl [--control-plane URL] [--token TOKEN] COMMAND ...
// FAULTLINE_CP and FAULTLINE_CP_TOKEN stand in for a flag not given.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

struct GlobalFlags {
  std::string cp_url;
  std::string cp_token;
  bool cp_flag_given = false;  // --control-plane on the command line, not only FAULTLINE_CP
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads the global flags at the front of args (--flag VALUE or --flag=VALUE)
// and removes them; stops at the first other word. A flag without a value is
// bad input, and args is then left as it was.
[[nodiscard]] Result<GlobalFlags> take_global_flags(std::vector<std::string>& args, const EnvLookup& env);

}  // namespace faultline
