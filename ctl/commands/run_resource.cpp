// faultctl run process|cpu|memory|disk: a host resource fault, ended by a
// detached reaper even if faultctl dies, run guarded.
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/resource_args.h"
#include "userspace/faults/resource/run.h"

namespace faultline {

int cmd_run_resource(const std::vector<std::string>& args) {
  constexpr std::string_view who = "faultctl run";
  // No root check: a resource fault needs a state folder it may write
  // (FAULTLINE_RUN_DIR) and rights over what it hits, which apply() finds out.
  return run_command(who, parse_resource_args(args), kRootNever, [&](ResourceRunArgs& a) {
    auto fault = ResourceRun::plan(a.spec);
    if (!fault) return report_error(who, fault.error());
    if (a.flags.record) (*fault)->set_record_dir(a.flags.record->dir);
    return run_fault(**fault, a.flags, std::string(who));
  });
}

}  // namespace faultline
