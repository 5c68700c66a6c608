// The faultctl commands, one file each in ctl/commands/; each takes the words
// after its name and returns the exit code (base/exit_code.h).
#pragma once

#include <string>
#include <vector>

namespace faultline {

int cmd_run(const std::vector<std::string>& args);           // dispatches to the five below
int cmd_run_packet(const std::vector<std::string>& args);    // run KIND ...
int cmd_run_syscall(const std::vector<std::string>& args);   // run syscall ... (args after "syscall")
int cmd_run_resource(const std::vector<std::string>& args);  // run process|cpu|memory|disk ...
int cmd_run_tcp(const std::vector<std::string>& args);       // run tcp ... (args after "tcp")
int cmd_run_http(const std::vector<std::string>& args);      // run http ... (args after "http")
int cmd_guard(const std::vector<std::string>& args);
int cmd_mcp_guard(const std::vector<std::string>& args);  // mcp-guard ... -- SERVER, or mcp-guard pins ...
int cmd_top(const std::vector<std::string>& args);
int cmd_status(const std::vector<std::string>& args);
int cmd_abort(const std::vector<std::string>& args);
int cmd_features(const std::vector<std::string>& args);
int cmd_uninstall(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_policy(const std::vector<std::string>& args);     // policy validate|compile|apply|delete|export|diff
int cmd_apply(const std::vector<std::string>& args);      // apply -f FILE: a Policy or a Chaos Mesh NetworkChaos
int cmd_ca(const std::vector<std::string>& args);         // ca init|show|export|rotate
int cmd_approvals(const std::vector<std::string>& args);  // approvals list | approve ID | deny ID: held requests
int cmd_activity(const std::vector<std::string>& args);   // activity verify FILE: the guard's activity chain
int cmd_catalogue(const std::vector<std::string>& args);  // catalogue list|show|render: the orchestration's templates
int cmd_scenario(const std::vector<std::string>& args);   // scenario validate|run FILE: experiments in order
// faultctl --control-plane URL run|list|watch|abort ...: experiments on faultcp's agents.
int cmd_remote(const std::string& name, const std::vector<std::string>& args, const std::string& url,
               const std::string& token);
// faultctl --control-plane URL mcp [--allow-actions]: faultcp's read tools as an MCP server on stdio.
int cmd_mcp(const std::vector<std::string>& args, const std::string& url, const std::string& token);

}  // namespace faultline
