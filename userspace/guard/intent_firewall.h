// --intent-firewall: the session's mission is the first user turn of its model
// calls; each later action (a request to a host, a tool call the model
// decides, an exec) is judged against it. A heuristic decides the clear cases
// (a credential store, a data-sending or persistence command, a write to a
// host the mission has nothing to do with: off-mission; an action that names
// what the mission names, or only looks around: serves it); the rest are
// unclear, and an optional judge model is asked about them (the caller's, on
// its own thread: this library makes no network call). docs/detectors.md,
// "Intent firewall".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/guard/dlp_validators.h"

namespace faultline {

enum class IntentVerdict : uint8_t { serves, off_mission, unclear };
[[nodiscard]] std::string_view intent_verdict_name(IntentVerdict v);  // "serves", "off-mission", "unclear"

enum class IntentActionKind : uint8_t { request, tool_call, exec };
[[nodiscard]] std::string_view intent_action_kind_name(IntentActionKind k);  // "request", "tool_call", "exec"

// One action of the session.
struct IntentAction {
  IntentActionKind kind = IntentActionKind::request;
  // request: the method ("POST"); tool_call: the tool's name; exec: the program.
  std::string verb;
  // request: "host:port" as the proxy saw it; else empty.
  std::string host;
  // request: the target (path and query); tool_call: the arguments (JSON
  // text); exec: the whole command line.
  std::string detail;
  [[nodiscard]] std::string describe() const;  // "POST 127.0.0.1:8080/collect", "tool bash {...}", "exec /bin/nc ..."
};

// The mission: the first user turn, and what the heuristic reads of it.
struct IntentMission {
  std::string text;             // cut at kMaxMissionText
  std::set<std::string> words;  // significant words (lower case, 3+ letters, no stop words)
  std::set<std::string> hosts;  // hosts it names (mirror_watch.h's reading), lower case
};
inline constexpr size_t kMaxMissionText = 8192;
[[nodiscard]] IntentMission intent_mission(std::string_view first_user_turn, const TldSet& tlds);

struct IntentJudgement {
  IntentVerdict verdict = IntentVerdict::unclear;
  std::string why;
};

// The heuristic: clear cases only; unclear otherwise.
[[nodiscard]] IntentJudgement judge_intent(const IntentMission& mission, const IntentAction& action);

// The judge model's request and answer. Anthropic Messages API (a URL ending
// in /v1/messages) or OpenAI chat completions (/chat/completions).
enum class IntentJudgeShape : uint8_t { anthropic, openai };
[[nodiscard]] std::optional<IntentJudgeShape> intent_judge_shape_for(std::string_view url_path);
[[nodiscard]] std::string intent_judge_request_body(IntentJudgeShape shape, const std::string& model,
                                                    const IntentMission& mission, const IntentAction& action);
// Only a 200 whose text holds {"verdict":"serves"|"off-mission","reason":"..."}
// decides; anything else is an error naming what was wrong (the caller fails open).
[[nodiscard]] Result<IntentJudgement> read_intent_judge_answer(IntentJudgeShape shape, int status,
                                                               std::string_view body);

// The session's state: its mission once captured, and each action judged
// once (a repeated action is neither flagged nor asked about again).
class IntentFirewall {
 public:
  // The judge model, asked synchronously on the caller's thread (a thread of
  // its own, never the proxy's worker): its verdict, or why none (then the
  // action is not flagged: failing open). Null: no judge.
  using Judge = std::function<Result<IntentJudgement>(const IntentMission&, const IntentAction&)>;
  IntentFirewall(std::shared_ptr<const TldSet> tlds, Judge judge) : tlds_(std::move(tlds)), judge_(std::move(judge)) {}

  // The first user turn of a model call: the mission, when none is yet.
  // True when this call set it.
  bool offer_mission(std::string_view first_user_turn);
  [[nodiscard]] std::optional<IntentMission> mission() const;
  [[nodiscard]] bool has_mission() const {
    std::lock_guard lock(mu_);
    return mission_.has_value();
  }

  // An action: the heuristic's judgement (nullopt before the mission is
  // known, and for an action judged before).
  [[nodiscard]] std::optional<IntentJudgement> consider(const IntentAction& action);
  [[nodiscard]] bool has_judge() const { return static_cast<bool>(judge_); }
  // The judge's word on an action the heuristic left unclear.
  [[nodiscard]] Result<IntentJudgement> ask_judge(const IntentAction& action) const;

 private:
  std::shared_ptr<const TldSet> tlds_;
  Judge judge_;
  mutable std::mutex mu_;
  std::optional<IntentMission> mission_;
  std::set<std::string> seen_;
};

}  // namespace faultline
