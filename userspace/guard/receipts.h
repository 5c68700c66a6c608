// --receipts: completion claims in an LLM answer ("tests pass", "the build
// succeeds", "removed the key") checked against the tool calls the session
// really made, as its request history shows them: verified, unverified or
// unknown, conservative by design (a claim is verified only by a matching
// run whose output says so). docs/detectors.md, "Receipts".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/guard/llm_request_scan.h"

namespace faultline {

// One tool call of the history and what came back.
struct ToolRun {
  std::string call;    // the tool's name and its arguments as text
  std::string result;  // the tool result's text ("" when none came)
  bool error = false;  // the result says is_error
};

// The tool calls and results of a request body's history (Anthropic
// tool_use/tool_result blocks, OpenAI chat tool_calls/tool messages,
// Responses function_call/function_call_output items), in order. An error
// when the body is not a JSON object.
[[nodiscard]] Result<std::vector<ToolRun>> tool_runs(LlmEndpoint endpoint, std::string_view body);

enum class ReceiptVerdict : uint8_t { verified, unverified, unknown };
[[nodiscard]] std::string_view receipt_verdict_name(ReceiptVerdict v);

struct Receipt {
  std::string claim;  // "tests pass", "build succeeds", "removed the key"
  ReceiptVerdict verdict = ReceiptVerdict::unknown;
  std::string why;
};

// The claims an answer's text makes, each checked against the runs.
[[nodiscard]] std::vector<Receipt> check_claims(std::string_view answer_text, const std::vector<ToolRun>& runs);

}  // namespace faultline
