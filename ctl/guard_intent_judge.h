// --intent-judge-url, --intent-judge-model: the intent firewall's judge model,
// asked over HTTP(S) about the actions its heuristic leaves unclear
// (userspace/guard/intent_firewall.h; docs/detectors.md, "Intent firewall").
#pragma once

#include <chrono>
#include <string>

#include "base/result.h"
#include "userspace/guard/intent_firewall.h"

namespace faultline {

struct IntentJudgeConfig {
  std::string url;  // ends in /v1/messages (Anthropic) or /chat/completions (OpenAI)
  std::string model;
  std::string key_env = "FAULTLINE_INTENT_JUDGE_KEY";  // the variable holding its API key
  std::chrono::milliseconds timeout{10'000};
};

// The judge as IntentFirewall wants it: one call a question, each within the
// timeout; an error (no answer, a non-200, an answer not understood) is
// returned, and the firewall fails open. Bad input naming the flag when the
// URL has no known shape or the key's variable is unset.
[[nodiscard]] Result<IntentFirewall::Judge> make_intent_judge(const IntentJudgeConfig& config);

}  // namespace faultline
