// The history's tool runs by provider shape; claims and their checks as
// patterns (std::regex: an answer's text is small and read once).
#include "userspace/guard/receipts.h"

#include <nlohmann/json.hpp>
#include <regex>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace receipts_detail {

using ReceiptJson = nlohmann::json;

const ReceiptJson& receipt_member(const ReceiptJson& o, const char* key) {
  static const ReceiptJson kNull;
  if (!o.is_object()) return kNull;
  const auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

std::string receipt_str(const ReceiptJson& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

// A tool result's content: a string, or text blocks.
std::string receipt_content(const ReceiptJson& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string out;
  if (c.is_array())
    for (const ReceiptJson& b : c) out += receipt_str(receipt_member(b, "text")) + "\n";
  return out;
}

struct ClaimRule {
  const char* claim;
  const char* said;     // in the answer
  const char* command;  // a run that would show it
  const char* failed;   // its output when it did not hold
  const char* passed;   // its output when it held ("" : never verified, only unknown)
};

const ClaimRule kClaims[] = {
    {"tests pass",
     R"(\b(all (the )?|the )?tests? (now )?(pass|passed|are passing|succeed|succeeded)\b|\btest suite (passes|passed)\b)",
     R"(\b(pytest|npm (run )?test|yarn test|pnpm test|go test|cargo test|make (test|check)|ctest|jest|mocha|vitest|unittest|mvn test|gradle test|tox|rspec|phpunit)\b)",
     R"(\b(FAILED|FAIL|[1-9][0-9]* failed|failures?: ?[1-9]|errors?: ?[1-9]|exit code:? ?[1-9]|exit status [1-9])\b)",
     R"(\b([0-9]+ passed|PASS|OK|all tests passed|tests? passed|0 failed)\b)"},
    {"build succeeds",
     R"(\b(the )?build (now )?(succeeds|succeeded|passes|passed|is green|works)\b|\bcompiles? (cleanly|successfully)\b|\bbuilds? successfully\b)",
     R"(\b(make|ninja|cmake --build|npm run build|yarn build|pnpm build|cargo build|go build|gcc|g\+\+|clang|tsc|mvn (package|install|compile)|gradle (build|assemble)|docker build)\b)",
     R"(\berror:|\bError [0-9]+\b|\*\*\* \[|\bBUILD FAILED\b|\bbuild failed\b|\bexit code:? ?[1-9]|\bexit status [1-9])",
     R"(\b(Build succeeded|BUILD SUCCESSFUL|Finished|compiled successfully|exit code:? ?0|Linking)\b)"},
    {"removed the key",
     R"(\b(removed|deleted|rotated|scrubbed|revoked) (the |that |all )?(api |secret |aws )?(keys?|secrets?|tokens?|credentials?)\b)",
     R"(\b(rm|git rm|sed -i|unset|shred|str_replace|edit|write)\b)", "", ""},
};

}  // namespace receipts_detail

using namespace receipts_detail;

std::string_view receipt_verdict_name(ReceiptVerdict v) {
  switch (v) {
    case ReceiptVerdict::verified:
      return "verified";
    case ReceiptVerdict::unverified:
      return "unverified";
    case ReceiptVerdict::unknown:
      return "unknown";
  }
  return "unknown";
}

Result<std::vector<ToolRun>> tool_runs(LlmEndpoint endpoint, std::string_view body) {
  const ReceiptJson j = ReceiptJson::parse(body, nullptr, false);
  if (!j.is_object()) return make_error(EINVAL, "not a JSON object");
  std::vector<ToolRun> runs;
  std::vector<std::pair<std::string, size_t>> by_id;  // call id -> its run
  auto call = [&](const std::string& id, std::string text) {
    by_id.emplace_back(id, runs.size());
    runs.push_back({std::move(text), "", false});
  };
  auto result = [&](const std::string& id, std::string text, bool error) {
    for (auto it = by_id.rbegin(); it != by_id.rend(); ++it)
      if (it->first == id) {
        runs[it->second].result = std::move(text);
        runs[it->second].error = error;
        return;
      }
  };
  if (endpoint == LlmEndpoint::AnthropicMessages || endpoint == LlmEndpoint::OpenAIChat) {
    const ReceiptJson& messages = receipt_member(j, "messages");
    if (!messages.is_array()) return runs;
    for (const ReceiptJson& m : messages) {
      const ReceiptJson& content = receipt_member(m, "content");
      if (endpoint == LlmEndpoint::AnthropicMessages) {
        if (!content.is_array()) continue;
        for (const ReceiptJson& b : content) {
          const std::string t = receipt_str(receipt_member(b, "type"));
          if (t == "tool_use")
            call(receipt_str(receipt_member(b, "id")),
                 receipt_str(receipt_member(b, "name")) + " " + receipt_member(b, "input").dump());
          else if (t == "tool_result")
            result(receipt_str(receipt_member(b, "tool_use_id")), receipt_content(receipt_member(b, "content")),
                   receipt_member(b, "is_error") == true);
        }
      } else {
        const ReceiptJson& calls = receipt_member(m, "tool_calls");
        if (calls.is_array())
          for (const ReceiptJson& c : calls) {
            const ReceiptJson& f = receipt_member(c, "function");
            call(receipt_str(receipt_member(c, "id")),
                 receipt_str(receipt_member(f, "name")) + " " + receipt_str(receipt_member(f, "arguments")));
          }
        if (receipt_str(receipt_member(m, "role")) == "tool")
          result(receipt_str(receipt_member(m, "tool_call_id")), receipt_content(content), false);
      }
    }
  } else if (endpoint == LlmEndpoint::OpenAIResponses) {
    const ReceiptJson& input = receipt_member(j, "input");
    if (!input.is_array()) return runs;
    for (const ReceiptJson& item : input) {
      const std::string t = receipt_str(receipt_member(item, "type"));
      if (t == "function_call")
        call(receipt_str(receipt_member(item, "call_id")),
             receipt_str(receipt_member(item, "name")) + " " + receipt_str(receipt_member(item, "arguments")));
      else if (t == "function_call_output")
        result(receipt_str(receipt_member(item, "call_id")), receipt_content(receipt_member(item, "output")), false);
    }
  }
  return runs;
}

std::vector<Receipt> check_claims(std::string_view answer_text, const std::vector<ToolRun>& runs) {
  std::vector<Receipt> out;
  const std::string text(answer_text);
  for (const ClaimRule& rule : kClaims) {
    if (!std::regex_search(text, std::regex(rule.said, std::regex::icase))) continue;
    Receipt r;
    r.claim = rule.claim;
    const std::regex command(rule.command);
    const ToolRun* last = nullptr;
    for (const ToolRun& run : runs)
      if (std::regex_search(run.call, command)) last = &run;
    if (last == nullptr) {
      r.verdict = ReceiptVerdict::unverified;
      r.why = "no tool call of the session ran one";
    } else if (rule.failed[0] == '\0') {
      r.verdict = ReceiptVerdict::unknown;
      r.why = "a call changed something, what it removed cannot be checked";
    } else if (last->error || std::regex_search(last->result, std::regex(rule.failed))) {
      r.verdict = ReceiptVerdict::unverified;
      r.why = "the last run's output says it failed";
    } else if (std::regex_search(last->result, std::regex(rule.passed))) {
      r.verdict = ReceiptVerdict::verified;
      r.why = "the last run's output says so";
    } else {
      r.verdict = ReceiptVerdict::unknown;
      r.why = last->result.empty() ? "the last run's output is not in the history" : "the last run's output is unclear";
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace faultline
