// A risk predicate on command lines: the destructive acts and the production
// targets an agent's command may carry (issue 28 §7), judged on the words a
// process is exec'd with. A shell's `-c` script is split into its simple
// commands and each is judged; `env`, `sudo`, `doas`, `nice`, `nohup`,
// `timeout`, `time`, `command`, `exec` and `xargs` are looked through to the
// command they run.
//
// Destructive: `rm` recursive and forced (any spelling: -rf, -fr, -r -f,
// --recursive --force), `git push --force` (-f, --force-with-lease, a +refspec),
// `git reset --hard`, `iptables`/`ip6tables` (any use), `gcloud beta`,
// `kubectl delete`, `terraform destroy` (and `apply -destroy`), `pulumi
// destroy`, and SQL's `DROP DATABASE` in any word. Production: `prod`,
// `production` or `live-cluster` as a token of a word (words split at
// characters other than letters, digits and '-', then at '-' for prod and
// production: `prod-eu` and `--context=production` count, `product` does not).
//
// What it cannot see: a command built at run time (variables, `eval` of
// computed text, a script file's contents): the exec gate judges each exec as
// it happens, so what such a script finally runs is judged then.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace faultline {

struct CommandRisk {
  enum class Kind { Destructive, Production };
  Kind kind = Kind::Destructive;
  std::string rule;     // "rm-recursive-force", "git-push-force", "production-target", ...
  std::string reason;   // for people: "rm -r -f: removes a tree without asking"
  std::string command;  // the simple command it was found in, its words joined by spaces
};

[[nodiscard]] const char* command_risk_kind_name(CommandRisk::Kind k);  // "destructive", "production"

// The risks of one exec: argv as the process gets it (argv[0] may be a path).
[[nodiscard]] std::vector<CommandRisk> command_risks(const std::vector<std::string>& argv);

// The simple commands of a shell script, each as its words (quotes and
// backslashes removed, nothing expanded: `$X` stays as written); the contents
// of `$(...)` and backquotes are commands of their own. Refused: an
// unterminated quote or substitution, naming it and where.
[[nodiscard]] Result<std::vector<std::vector<std::string>>> shell_commands(std::string_view script);

}  // namespace faultline
