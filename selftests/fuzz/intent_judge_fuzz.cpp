// libFuzzer target: the intent judge's answer is any bytes whatever answers
// at its URL sends; the first byte picks the shape and the status. An answer
// read is a verdict that decides (serves or off-mission) with a reason of at
// most 500 bytes; a refusal says why. The same bytes as a mission and as an
// action go through the heuristic, which always answers with a reason.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/guard/intent_firewall.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto shape = (data[0] & 1) ? faultline::IntentJudgeShape::openai : faultline::IntentJudgeShape::anthropic;
  const int status = (data[0] & 2) ? 500 : 200;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto r = faultline::read_intent_judge_answer(shape, status, in);
  if (r) {
    if (status != 200 || r->verdict == faultline::IntentVerdict::unclear || r->why.size() > 500) __builtin_trap();
  } else if (r.error().message.empty()) {
    __builtin_trap();
  }
  static const faultline::TldSet kNoTlds;
  const size_t half = in.size() / 2;
  const faultline::IntentMission m = faultline::intent_mission(in.substr(0, half), kNoTlds);
  const auto kind = static_cast<faultline::IntentActionKind>((data[0] >> 2) % 3);
  const faultline::IntentAction a{kind, std::string(in.substr(half, 16)), "127.0.0.1:80", std::string(in.substr(half))};
  if (faultline::judge_intent(m, a).why.empty()) __builtin_trap();
  return 0;
}
