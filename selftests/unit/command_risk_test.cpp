// The command risk predicate (issue 28 §7): a table of command lines, each
// with the rules it must break (none for the look-alikes), and the shell word
// splitter checked against bash's own splitting of the same scripts.
#include "userspace/guard/command_risk.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "selftests/lib/child_process.h"

namespace {

using faultline::command_risks;
using faultline::shell_commands;
using Words = std::vector<std::string>;

std::set<std::string> rules_of(const Words& argv) {
  std::set<std::string> out;
  for (const auto& r : command_risks(argv)) out.insert(r.rule);
  return out;
}

struct Row {
  Words argv;
  std::set<std::string> rules;
};

TEST(CommandRisk, TheTable) {
  const std::vector<Row> rows = {
      // rm -rf in any spelling, and its look-alikes
      {{"rm", "-rf", "/srv/data"}, {"rm-recursive-force"}},
      {{"/bin/rm", "-fr", "x"}, {"rm-recursive-force"}},
      {{"rm", "-r", "-f", "x"}, {"rm-recursive-force"}},
      {{"rm", "-R", "--force", "x"}, {"rm-recursive-force"}},
      {{"rm", "--recursive", "--force", "x"}, {"rm-recursive-force"}},
      {{"rm", "-rvf", "x"}, {"rm-recursive-force"}},
      {{"rm", "-r", "x"}, {}},
      {{"rm", "-f", "x"}, {}},
      {{"rm", "--", "-rf"}, {}},
      // git
      {{"git", "push", "--force", "origin", "main"}, {"git-push-force"}},
      {{"git", "push", "-f"}, {"git-push-force"}},
      {{"git", "push", "-uf", "origin", "x"}, {"git-push-force"}},
      {{"git", "push", "--force-with-lease=main"}, {"git-push-force"}},
      {{"git", "push", "origin", "+main"}, {"git-push-force"}},
      {{"git", "-C", "/repo", "push", "--force"}, {"git-push-force"}},
      {{"git", "push", "origin", "main"}, {}},
      {{"git", "reset", "--hard", "HEAD~1"}, {"git-reset-hard"}},
      {{"git", "reset", "--soft", "HEAD~1"}, {}},
      {{"git", "log", "--force"}, {}},
      // the rest of the destructive list
      {{"iptables", "-F"}, {"iptables"}},
      {{"/usr/sbin/ip6tables-restore"}, {"iptables"}},
      {{"gcloud", "beta", "compute", "instances", "list"}, {"gcloud-beta"}},
      {{"gcloud", "--project", "beta", "compute", "list"}, {}},
      {{"kubectl", "delete", "pod", "x"}, {"kubectl-delete"}},
      {{"kubectl", "-n", "dev", "delete", "pod", "x"}, {"kubectl-delete"}},
      {{"kubectl", "get", "pods"}, {}},
      {{"kubectl", "-n", "delete", "get", "pods"}, {}},
      {{"terraform", "destroy", "-auto-approve"}, {"terraform-destroy"}},
      {{"terraform", "apply", "-destroy"}, {"terraform-destroy"}},
      {{"terraform", "apply"}, {}},
      {{"pulumi", "destroy", "--yes"}, {"pulumi-destroy"}},
      {{"pulumi", "up"}, {}},
      {{"psql", "-c", "DROP   DATABASE shop"}, {"sql-drop-database"}},
      {{"psql", "-c", "drop table t"}, {}},
      // production as a token, not a substring
      {{"kubectl", "--context", "prod-eu", "get", "pods"}, {"production-target"}},
      {{"deploy", "--env=production"}, {"production-target"}},
      {{"ssh", "live-cluster.example.com"}, {"production-target"}},
      {{"cat", "product.txt"}, {}},
      {{"echo", "reproduce"}, {}},
      // through wrappers and shells
      {{"sudo", "-u", "root", "rm", "-rf", "/"}, {"rm-recursive-force"}},
      {{"env", "-i", "A=1", "rm", "-rf", "x"}, {"rm-recursive-force"}},
      {{"nice", "-n", "5", "nohup", "timeout", "-s", "KILL", "10", "git", "reset", "--hard"}, {"git-reset-hard"}},
      {{"bash", "-c", "cd /srv && rm -rf data"}, {"rm-recursive-force"}},
      {{"sh", "-ec", "echo hi; git push --force"}, {"git-push-force"}},
      {{"bash", "-lc", "x=$(kubectl delete ns a)"}, {"kubectl-delete"}},
      {{"bash", "-c", "echo `terraform destroy`"}, {"terraform-destroy"}},
      {{"bash", "-c", "r\"m\" -r'f' x"}, {"rm-recursive-force"}},
      {{"bash", "-c", "echo 'rm -rf x'"}, {}},
      {{"bash", "-c", "bash -c 'sudo rm -rf /'"}, {"rm-recursive-force"}},
      {{"bash", "script.sh", "rm", "-rf"}, {}},
      {{"busybox", "rm", "-rf", "x"}, {"rm-recursive-force"}},
      {{"bash", "-c", "rm -rf 'unterminated"}, {"rm-recursive-force"}},
      {{"ls", "-la"}, {}},
      {{}, {}},
  };
  for (const auto& row : rows) {
    std::string line;
    for (const auto& w : row.argv) line += w + " ";
    EXPECT_EQ(rules_of(row.argv), row.rules) << line;
  }
}

TEST(CommandRisk, AFindingNamesTheCommandAndWhy) {
  auto r = command_risks({"bash", "-c", "cd /srv; sudo rm -rf data"});
  ASSERT_EQ(r.size(), 1U);
  EXPECT_EQ(r[0].kind, faultline::CommandRisk::Kind::Destructive);
  EXPECT_EQ(r[0].command, "rm -rf data");
  EXPECT_EQ(r[0].reason, "rm -r -f: removes a tree without asking");
  EXPECT_STREQ(faultline::command_risk_kind_name(r[0].kind), "destructive");
}

// What bash makes of a script's words: printf prints each as bash split it.
Words bash_words(const std::string& script) {
  auto r = fltest::run_command({"/bin/bash", "--norc", "-c", "printf '%s\\0' " + script});
  Words out;
  std::string w;
  for (char c : r.out) {
    if (c == '\0') {
      out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  return out;
}

TEST(ShellWords, SplitAsBashSplitsThem) {
  const std::vector<std::string> scripts = {
      "a b  c",          "'a b' \"c d\" e\\ f", "\"a\\\"b\" 'c\\d' \"\\$x\" \"\\\\\"", "ab\"cd\"'ef'g", "'' \"\" x",
      "\"a\nb\" c\\\nd", "-rf -- --x=y",
  };
  for (const auto& s : scripts) {
    auto mine = shell_commands(s);
    ASSERT_TRUE(mine) << s << ": " << mine.error().message;
    ASSERT_EQ(mine->size(), 1U) << s;
    EXPECT_EQ((*mine)[0], bash_words(s)) << s;
  }
}

TEST(ShellWords, CommandsAndSubstitutions) {
  auto c = shell_commands("a 1; b 2 && c|d & e # f g\n(h) 2>&1 i $(j k) `l`");
  ASSERT_TRUE(c);
  // In the order they are read; a substitution's commands before the one it is in.
  const std::vector<Words> want = {
      {"a", "1"}, {"b", "2"}, {"c"}, {"d"}, {"e"}, {"h"}, {"j", "k"}, {"l"}, {"2>&1", "i", "$(j k)", "`l`"}};
  EXPECT_EQ(*c, want);
}

TEST(ShellWords, UnterminatedIsRefusedNamingWhere) {
  for (const auto& [script, message] :
       std::vector<std::pair<std::string, std::string>>{{"echo 'a", "unterminated ' at byte 6"},
                                                        {"echo \"a", "unterminated \" at byte 6"},
                                                        {"echo $(a", "unterminated $( at byte 6"},
                                                        {"echo `a", "unterminated ` at byte 6"}}) {
    auto c = shell_commands(script);
    ASSERT_FALSE(c) << script;
    EXPECT_EQ(c.error().message, message);
    EXPECT_TRUE(c.error().bad_input);
  }
  std::string deep;
  for (int i = 0; i < 40; ++i) deep += "$(";
  for (int i = 0; i < 40; ++i) deep += ")";
  auto c = shell_commands(deep);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("nested deeper than"), std::string::npos);
}

}  // namespace
