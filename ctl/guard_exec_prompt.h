// --approve-dangerous at a terminal: each held exec asked on /dev/tty, one
// question at a time,
//   faultline guard: run '/usr/bin/rm -rf /srv/old' (rm-recursive-force: ...), pid 42?
//   [o]nce, [a]lways (this command line, this session), [d]eny:
// while the approval queue keeps the hold: faultctl approvals, faultcp or the
// timeout may decide first, and the question is then withdrawn on the
// terminal. A terminal that closes (EOF) leaves the holds to the queue.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/result.h"
#include "base/unique_fd.h"

namespace faultline {

enum class PromptAnswer : uint8_t { Once, Always, Deny };

// "o", "once", "y", "yes" -> Once; "a", "always" -> Always; "d", "deny",
// "n", "no" -> Deny (any case, spaces around); nothing else.
[[nodiscard]] std::optional<PromptAnswer> parse_prompt_answer(std::string_view line);

class ExecPrompt {
 public:
  // The command's terminal: stdin is a terminal, /dev/tty opens, and this
  // process is in its foreground group (a guard in the background, or under
  // a test harness, asks nobody). Null when not.
  [[nodiscard]] static std::shared_ptr<ExecPrompt> open_terminal();
  // Opens `tty` (a terminal device), for --approve-prompt tty: an error says
  // why it cannot be used.
  [[nodiscard]] static Result<std::shared_ptr<ExecPrompt>> open(const std::string& tty);
  ~ExecPrompt();
  ExecPrompt(const ExecPrompt&) = delete;
  ExecPrompt& operator=(const ExecPrompt&) = delete;

  // Queues a question; `answered` runs once on the prompt's thread with the
  // person's answer, unless the question is withdrawn first. Without
  // can_always the question offers once and deny only.
  void ask(std::string id, std::string question, bool can_always, std::function<void(PromptAnswer)> answered);
  // The hold was decided elsewhere: its question is dropped, or, when on the
  // terminal, ended there with `why`.
  void withdraw(const std::string& id, const std::string& why);

 private:
  struct Question {
    std::string id, text;
    bool can_always = false;
    std::function<void(PromptAnswer)> answered;
  };
  explicit ExecPrompt(UniqueFd tty);
  void run();
  void say(const std::string& s) const;

  UniqueFd tty_, wake_;
  std::mutex mu_;
  std::deque<Question> waiting_;
  std::string asking_;     // the id on the terminal now ("" none)
  std::string withdrawn_;  // why asking_ was decided elsewhere ("" not)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace faultline
