// faultctl activity verify FILE: checks the guard's activity log, chain by
// chain, and names the first entry that breaks one.
#include <iostream>

#include "base/exit_code.h"
#include "ctl/command.h"
#include "ctl/commands/commands.h"
#include "ctl/flag_error.h"
#include "userspace/guard/activity_log.h"

namespace faultline {
namespace {

constexpr const char* kActivityUsage =
    "usage: faultctl activity verify FILE\n"
    "  checks the guard's activity log (--json-log FILE): every line parses,\n"
    "  each identity's entries run seq 1, 2, 3, ... and each chains to the\n"
    "  hash of the one before (SHA-256). Exit 0 when intact, 1 naming the\n"
    "  first bad entry (line, identity, seq, what is wrong), 2 on bad input.\n"
    "  A file alone cannot show entries cut off the end of a chain.\n";

constexpr Example kActivityExamples[] = {
    {"check a guard's log before handing it over", "faultctl activity verify guard.jsonl"},
};

struct ActivityArgs {
  std::string file;
};

Result<Parsed<ActivityArgs>> parse_activity_args(const std::vector<std::string>& args) {
  if (args.empty()) return bad("give a subcommand: verify FILE");
  if (args[0] == "-h" || args[0] == "--help")
    return Parsed<ActivityArgs>(HelpText{with_examples(kActivityUsage, kActivityExamples)});
  if (args[0] != "verify") return bad("unknown subcommand '" + args[0] + "' (verify FILE)");
  ActivityArgs a;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (w == "-h" || w == "--help")
      return Parsed<ActivityArgs>(HelpText{with_examples(kActivityUsage, kActivityExamples)});
    if (w.size() > 1 && w[0] == '-') return bad("unknown flag '" + w + "'");
    if (!a.file.empty()) return bad("one file at a time ('" + a.file + "', then '" + w + "')");
    a.file = w;
  }
  if (a.file.empty()) return bad("give the activity log: verify FILE");
  return Parsed<ActivityArgs>(std::move(a));
}

}  // namespace

int cmd_activity(const std::vector<std::string>& args) {
  const std::string who = "faultctl activity";
  return run_command(who, parse_activity_args(args), kRootNever, [&](const ActivityArgs& a) {
    auto v = verify_activity(a.file);
    if (!v) return report_error(who + " verify", v.error());
    if (v->first_bad) {
      std::cout << a.file << ": " << v->first_bad->describe() << "\n"
                << "  " << v->entries << " entries before it verify\n";
      return static_cast<int>(kExitFailure);
    }
    std::cout << a.file << ": intact, " << v->entries << " entries of " << v->identities << " identities\n";
    return static_cast<int>(kExitCompleted);
  });
}

}  // namespace faultline
