// `faultctl mcp-guard install | status | uninstall`: the MCP servers of the
// clients' configuration files (Claude Desktop, Claude Code's user and
// project files, Cursor's global and project files), wrapped in
// `faultctl mcp-guard` or unwrapped again. A diff unless applied; an applied
// change is an atomic replacement that keeps every other key as it was.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

struct McpInstallOptions {
  std::string verb;  // install, status, uninstall
  bool apply = false;
  std::string home;                      // $HOME
  std::string config_home;               // $XDG_CONFIG_HOME, else HOME/.config
  std::string project;                   // the project folder (.mcp.json, .cursor/mcp.json); default the cwd
  std::string faultctl;                  // the faultctl the wrappers run (this one's absolute path)
  std::vector<std::string> guard_flags;  // install: the flags each wrapper runs with (after "mcp-guard")
  std::string state_dir;                 // where the originals are kept for uninstall
};

// The files looked at, in order: (client label, path).
[[nodiscard]] std::vector<std::pair<std::string, std::string>> mcp_client_configs(const McpInstallOptions& o);

// Runs the verb, printing to stdout; the exit code (0 done, 1 an error, 2
// bad input: a malformed file, named with its line and column, and nothing
// written anywhere).
[[nodiscard]] int run_mcp_install(const McpInstallOptions& o);

}  // namespace faultline
