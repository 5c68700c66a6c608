// The faultctl subcommands; each takes its arguments and returns an exit code.
#pragma once

#include <string>
#include <vector>

namespace faultline {

int cmd_run(const std::vector<std::string>& args);
int cmd_status(const std::vector<std::string>& args);
int cmd_abort(const std::vector<std::string>& args);
int cmd_features(const std::vector<std::string>& args);
int cmd_uninstall(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_run_syscall(const std::vector<std::string>& args);
int cmd_guard(const std::vector<std::string>& args);
int cmd_top(const std::vector<std::string>& args);

}  // namespace faultline
