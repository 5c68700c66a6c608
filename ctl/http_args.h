// `faultctl run http` flags -> a TcpFaultSpec with one HTTP fault, with one-line
// errors naming the flag.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "ctl/help.h"
#include "ctl/tcp_args.h"

namespace faultline {

// args are what follows "run http": flags, and for the command scope "--" and the command.
[[nodiscard]] Result<Parsed<TcpRunArgs>> parse_http_args(const std::vector<std::string>& args);

}  // namespace faultline
