// Shell words without a shell, and the rules over the simple commands they make.
#include "userspace/guard/command_risk.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace faultline {
namespace {

constexpr int kMaxNesting = 16;          // $( $( ... ) ) and -c scripts inside -c scripts
constexpr size_t kMaxCommandText = 200;  // CommandRisk::command, for people

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
    if (out.size() > kMaxCommandText) return out.substr(0, kMaxCommandText) + "...";
  }
  return out;
}

// --- shell words ------------------------------------------------------------

class ShellSplitter {
 public:
  ShellSplitter(std::string_view s, int depth) : s_(s), depth_(depth) {}

  Result<std::vector<std::vector<std::string>>> run() {
    if (depth_ > kMaxNesting) return input_error(0, "substitutions nested deeper than " + std::to_string(kMaxNesting));
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c == ' ' || c == '\t') {
        end_word();
        ++at_;
      } else if (c == '\n' || c == ';' || c == '|' || c == '(' || c == ')') {
        end_command();
        ++at_;
      } else if (c == '&') {
        // 2>&1, >&2: part of a redirection; otherwise & and && end a command.
        if (in_word_ && !word_.empty() && (word_.back() == '>' || word_.back() == '<')) {
          word_ += c;
          ++at_;
        } else {
          end_command();
          ++at_;
        }
      } else if (c == '#' && !in_word_) {
        while (at_ < s_.size() && s_[at_] != '\n') ++at_;
      } else if (c == '\\') {
        ++at_;
        if (at_ >= s_.size()) break;        // a trailing backslash: nothing to escape
        if (s_[at_] != '\n') add(s_[at_]);  // backslash-newline: a line continued
        ++at_;
      } else if (c == '\'') {
        const size_t close = s_.find('\'', at_ + 1);
        if (close == std::string_view::npos) return unterminated("'", at_);
        in_word_ = true;
        word_.append(s_.substr(at_ + 1, close - at_ - 1));
        at_ = close + 1;
      } else if (c == '"') {
        FL_TRY(double_quoted());
      } else if (c == '`') {
        FL_TRY(backquoted());
      } else if (c == '$' && at_ + 1 < s_.size() && s_[at_ + 1] == '(') {
        FL_TRY(substitution());
      } else {
        add(c);
        ++at_;
      }
    }
    end_command();
    return std::move(commands_);
  }

 private:
  Error unterminated(const std::string& what, size_t where) const {
    return input_error(0, "unterminated " + what + " at byte " + std::to_string(where + 1));
  }
  void add(char c) {
    word_ += c;
    in_word_ = true;
  }
  void end_word() {
    if (in_word_) current_.push_back(std::move(word_));
    word_.clear();
    in_word_ = false;
  }
  void end_command() {
    end_word();
    if (!current_.empty()) commands_.push_back(std::move(current_));
    current_.clear();
  }
  // Inner text as commands of their own; the word keeps the text as written.
  Status inner(std::string_view text) {
    auto inner = ShellSplitter(text, depth_ + 1).run();
    if (!inner) return inner.error();
    for (auto& c : *inner) commands_.push_back(std::move(c));
    return {};
  }

  Status double_quoted() {
    const size_t open = at_;
    in_word_ = true;
    ++at_;
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c == '"') {
        ++at_;
        return {};
      }
      if (c == '\\' && at_ + 1 < s_.size() &&
          std::string_view("$`\"\\\n").find(s_[at_ + 1]) != std::string_view::npos) {
        if (s_[at_ + 1] != '\n') word_ += s_[at_ + 1];
        at_ += 2;
      } else if (c == '`') {
        FL_TRY(backquoted());
      } else if (c == '$' && at_ + 1 < s_.size() && s_[at_ + 1] == '(') {
        FL_TRY(substitution());
      } else {
        word_ += c;
        ++at_;
      }
    }
    return unterminated("\"", open);
  }

  Status backquoted() {
    const size_t open = at_;
    size_t i = at_ + 1;
    std::string text;
    while (i < s_.size() && s_[i] != '`') {
      if (s_[i] == '\\' && i + 1 < s_.size()) ++i;
      text += s_[i++];
    }
    if (i >= s_.size()) return unterminated("`", open);
    FL_TRY(inner(text));
    word_.append(s_.substr(at_, i + 1 - at_));
    in_word_ = true;
    at_ = i + 1;
    return {};
  }

  // $( ... ) to its matching parenthesis, quotes inside skipped.
  Status substitution() {
    const size_t open = at_;
    size_t i = at_ + 2;
    int depth = 1;
    while (i < s_.size() && depth > 0) {
      const char c = s_[i];
      if (c == '\\') {
        i += 2;
        continue;
      }
      if (c == '\'') {
        const size_t close = s_.find('\'', i + 1);
        if (close == std::string_view::npos) return unterminated("'", i);
        i = close + 1;
        continue;
      }
      if (c == '"') {
        size_t j = i + 1;
        while (j < s_.size() && s_[j] != '"') j += s_[j] == '\\' ? 2 : 1;
        if (j >= s_.size()) return unterminated("\"", i);
        i = j + 1;
        continue;
      }
      if (c == '(') ++depth;
      if (c == ')') --depth;
      ++i;
    }
    if (depth > 0) return unterminated("$(", open);
    FL_TRY(inner(s_.substr(open + 2, i - 1 - (open + 2))));
    word_.append(s_.substr(open, i - open));
    in_word_ = true;
    at_ = i;
    return {};
  }

  std::string_view s_;
  int depth_;
  size_t at_ = 0;
  std::string word_;
  bool in_word_ = false;  // "" is a word
  std::vector<std::string> current_;
  std::vector<std::vector<std::string>> commands_;
};

// --- the rules ----------------------------------------------------------------

struct Judge {
  std::vector<CommandRisk> out;
  std::set<std::string> seen;  // each rule once per exec: the first command that breaks it

  void add(CommandRisk::Kind kind, const std::string& rule, const std::string& reason,
           const std::vector<std::string>& words) {
    CommandRisk r{kind, rule, reason, joined(words)};
    if (seen.insert(rule).second) out.push_back(std::move(r));
  }

  // The words after a wrapper's options; takes_value: its options that take
  // the next word as their value.
  static std::vector<std::string> after_options(const std::vector<std::string>& w, size_t from,
                                                const std::set<std::string>& takes_value) {
    size_t i = from;
    while (i < w.size()) {
      const std::string& a = w[i];
      if (a == "--") {
        ++i;
        break;
      }
      if (a.size() < 2 || a[0] != '-') break;
      if (takes_value.contains(a)) ++i;
      ++i;
    }
    return {w.begin() + static_cast<std::ptrdiff_t>(std::min(i, w.size())), w.end()};
  }

  // The first word that is not an option (nor the value of one that takes it).
  static std::string first_positional(const std::vector<std::string>& w, const std::set<std::string>& takes_value) {
    for (size_t i = 1; i < w.size(); ++i) {
      if (w[i].size() > 1 && w[i][0] == '-') {
        if (takes_value.contains(w[i])) ++i;
        continue;
      }
      return w[i];
    }
    return "";
  }

  void production(const std::vector<std::string>& words) {
    for (const auto& word : words) {
      std::string token;
      auto judge_token = [&] {
        const std::string t = lower(token);
        token.clear();
        if (t.empty()) return false;
        if (t.find("live-cluster") != std::string::npos) return true;
        size_t start = 0;
        while (start <= t.size()) {
          const size_t dash = t.find('-', start);
          const std::string piece = t.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
          if (piece == "prod" || piece == "production") return true;
          if (dash == std::string::npos) break;
          start = dash + 1;
        }
        return false;
      };
      bool hit = false;
      for (char c : word) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '-') {
          token += c;
        } else if (judge_token()) {
          hit = true;
        }
      }
      if (judge_token()) hit = true;
      if (hit) {
        add(CommandRisk::Kind::Production, "production-target", "names a production target ('" + word + "')", words);
        return;
      }
    }
  }

  void drop_database(const std::vector<std::string>& words) {
    for (const auto& word : words) {
      std::vector<std::string> tokens;
      std::string t;
      for (char c : word) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
          t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!t.empty()) {
          tokens.push_back(std::move(t));
          t.clear();
        }
      }
      if (!t.empty()) tokens.push_back(std::move(t));
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {
        if (tokens[i] == "drop" && tokens[i + 1] == "database") {
          add(CommandRisk::Kind::Destructive, "sql-drop-database", "SQL DROP DATABASE", words);
          return;
        }
      }
    }
  }

  void rm(const std::vector<std::string>& w) {
    bool recursive = false, force = false;
    for (size_t i = 1; i < w.size(); ++i) {
      const std::string& a = w[i];
      if (a == "--") break;
      if (a == "--recursive") recursive = true;
      if (a == "--force") force = true;
      if (a.size() > 1 && a[0] == '-' && a[1] != '-') {
        recursive = recursive || a.find_first_of("rR") != std::string::npos;
        force = force || a.find('f') != std::string::npos;
      }
    }
    if (recursive && force)
      add(CommandRisk::Kind::Destructive, "rm-recursive-force", "rm -r -f: removes a tree without asking", w);
  }

  void git(const std::vector<std::string>& w) {
    static const std::set<std::string> kGlobalValue = {
        "-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"};
    size_t i = 1;
    while (i < w.size() && w[i].size() > 1 && w[i][0] == '-') i += kGlobalValue.contains(w[i]) ? 2 : 1;
    if (i >= w.size()) return;
    const std::string& sub = w[i];
    const std::vector<std::string> args(w.begin() + static_cast<std::ptrdiff_t>(i) + 1, w.end());
    if (sub == "push") {
      for (const auto& a : args) {
        const bool force = a == "--force" || a.rfind("--force-with-lease", 0) == 0 ||
                           (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('f') != std::string::npos) ||
                           (a.size() > 1 && a[0] == '+');
        if (force) {
          add(CommandRisk::Kind::Destructive, "git-push-force", "git push --force: rewrites the remote's history", w);
          return;
        }
      }
    } else if (sub == "reset") {
      if (std::find(args.begin(), args.end(), "--hard") != args.end())
        add(CommandRisk::Kind::Destructive, "git-reset-hard", "git reset --hard: discards uncommitted work", w);
    }
  }

  void simple(const std::vector<std::string>& words, int depth) {
    // Leading assignments (A=1 B=2 cmd) are the command's environment.
    size_t first = 0;
    while (first < words.size()) {
      const std::string& a = words[first];
      const size_t eq = a.find('=');
      if (eq == std::string::npos || eq == 0 ||
          !std::all_of(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(eq),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
        break;
      ++first;
    }
    if (first >= words.size()) return;
    const std::vector<std::string> w(words.begin() + static_cast<std::ptrdiff_t>(first), words.end());
    // The command first: what a shell's script holds is found in the simple
    // command it is in, which names it better than the whole line.
    exec(w, depth);
    production(w);
    drop_database(w);
  }

  // The command w runs: wrappers looked through, shells' scripts split, the rules.
  void exec(const std::vector<std::string>& w, int depth) {
    if (w.empty() || depth > kMaxNesting) return;
    const std::string name = basename_of(w[0]);
    auto through = [&](const std::set<std::string>& takes_value) {
      auto rest = after_options(w, 1, takes_value);
      // env's NAME=VALUE words before the command
      while (!rest.empty() && rest.front().find('=') != std::string::npos && rest.front()[0] != '=')
        rest.erase(rest.begin());
      exec(rest, depth + 1);
    };
    if (name == "env") return through({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"});
    if (name == "sudo" || name == "doas")
      return through({"-u", "-g", "-h", "-C", "-D", "-p", "-r", "-t", "-U", "-T", "--user", "--group", "--host",
                      "--chdir", "--prompt", "--role", "--type", "--other-user", "--command-timeout"});
    if (name == "nice") return through({"-n", "--adjustment"});
    if (name == "nohup" || name == "time" || name == "command" || name == "builtin") return through({});
    if (name == "exec") return through({"-a"});
    if (name == "stdbuf") return through({"-i", "-o", "-e"});
    if (name == "xargs") return through({"-I", "-d", "-E", "-L", "-n", "-P", "-s", "-a", "--arg-file", "--delimiter"});
    if (name == "timeout") {
      auto rest = after_options(w, 1, {"-s", "--signal", "-k", "--kill-after"});
      if (!rest.empty()) rest.erase(rest.begin());  // the duration
      return exec(rest, depth + 1);
    }
    if (name == "bash" || name == "sh" || name == "dash" || name == "zsh" || name == "ksh" || name == "mksh" ||
        name == "busybox") {
      shell(w, depth);
      return;
    }
    if (name == "rm") return rm(w);
    if (name == "git") return git(w);
    if (name.rfind("iptables", 0) == 0 || name.rfind("ip6tables", 0) == 0)
      return add(CommandRisk::Kind::Destructive, "iptables", name + ": changes the host's firewall", w);
    if (name == "gcloud" && first_positional(w, {"--project", "--account", "--configuration"}) == "beta")
      return add(CommandRisk::Kind::Destructive, "gcloud-beta", "gcloud beta: unversioned commands on a cloud", w);
    if (name == "kubectl" && first_positional(w, {"-n", "--namespace", "--context", "--cluster", "--user",
                                                  "--kubeconfig", "-s", "--server", "--token", "--as", "--as-group",
                                                  "--request-timeout", "-v", "--v", "--certificate-authority",
                                                  "--client-certificate", "--client-key", "--cache-dir"}) == "delete")
      return add(CommandRisk::Kind::Destructive, "kubectl-delete", "kubectl delete: removes cluster objects", w);
    if (name == "terraform") {
      const std::string sub = first_positional(w, {});
      const bool destroy_flag = std::find_if(w.begin(), w.end(), [](const std::string& a) {
                                  return a == "-destroy" || a == "--destroy";
                                }) != w.end();
      if (sub == "destroy" || (sub == "apply" && destroy_flag))
        add(CommandRisk::Kind::Destructive, "terraform-destroy", "terraform destroy: removes managed infrastructure",
            w);
      return;
    }
    if (name == "pulumi") {
      const std::string sub = first_positional(w, {"-C", "--cwd", "-s", "--stack"});
      if (sub == "destroy" || sub == "down")
        add(CommandRisk::Kind::Destructive, "pulumi-destroy", "pulumi destroy: removes a stack's resources", w);
    }
  }

  // sh -c SCRIPT (also -ec, -lc, ...): the script's simple commands. busybox sh -c too.
  void shell(const std::vector<std::string>& w, int depth) {
    size_t i = 1;
    if (basename_of(w[0]) == "busybox") {
      if (w.size() < 2 || (w[1] != "sh" && w[1] != "ash" && w[1] != "bash")) {
        exec({w.begin() + 1, w.end()}, depth + 1);  // busybox rm -rf ...
        return;
      }
      i = 2;
    }
    bool dash_c = false;
    for (; i < w.size(); ++i) {
      const std::string& a = w[i];
      if (a == "--" || a.size() < 2 || (a[0] != '-' && a[0] != '+')) break;
      if (a == "-o" || a == "+o" || a == "-O" || a == "+O") {
        ++i;  // an option's name follows
        continue;
      }
      if (a[0] == '-' && a[1] != '-' && a.find('c') != std::string::npos) dash_c = true;
    }
    if (i < w.size() && w[i] == "--") ++i;
    if (!dash_c || i >= w.size()) return;  // a script file or stdin: judged exec by exec
    auto commands = shell_commands(w[i]);
    if (!commands) {
      // bash refuses it too; what its words say is still judged.
      std::vector<std::string> words;
      std::string word;
      for (char c : w[i]) {
        if (std::isspace(static_cast<unsigned char>(c))) {
          if (!word.empty()) words.push_back(std::move(word));
          word.clear();
        } else {
          word += c;
        }
      }
      if (!word.empty()) words.push_back(std::move(word));
      simple(words, depth + 1);
      return;
    }
    for (const auto& c : *commands) simple(c, depth + 1);
  }
};

}  // namespace

const char* command_risk_kind_name(CommandRisk::Kind k) {
  return k == CommandRisk::Kind::Production ? "production" : "destructive";
}

Result<std::vector<std::vector<std::string>>> shell_commands(std::string_view script) {
  return ShellSplitter(script, 0).run();
}

std::vector<CommandRisk> command_risks(const std::vector<std::string>& argv) {
  Judge j;
  j.simple(argv, 0);
  return std::move(j.out);
}

}  // namespace faultline
