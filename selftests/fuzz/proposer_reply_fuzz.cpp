// libFuzzer target: a model's answer to the proposer is any bytes a provider
// (or whatever answers at its URL) sends. The first byte picks the provider.
// A turn that reads has counts that are not negative and tool calls with an id
// and a name; a propose_experiment call's input is checked without a fault,
// and a refusal carries a code.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/orchestration/proposer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto provider = (data[0] & 1) ? faultline::ModelProvider::OpenAI : faultline::ModelProvider::Anthropic;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto t = faultline::read_model_turn(provider, in);
  if (!t) {
    if (t.error().message.empty() || !t.error().bad_input) __builtin_trap();
    return 0;
  }
  const auto& u = t->usage;
  if (u.input_tokens < 0 || u.output_tokens < 0 || u.thinking_tokens < 0) __builtin_trap();
  if (u.tool_calls != static_cast<int64_t>(t->tool_calls.size())) __builtin_trap();
  if (faultline::TokenLedger().cost(u) < 0) __builtin_trap();
  for (const auto& c : t->tool_calls) {
    if (c.id.empty()) __builtin_trap();
    auto p = faultline::read_proposed_experiment(c.input);
    if (auto* r = std::get_if<faultline::ProposalRefusal>(&p)) {
      if (r->code.empty() || r->message.empty()) __builtin_trap();
    } else {
      const auto& e = std::get<faultline::ProposedExperiment>(p);
      if (e.reasoning.empty()) __builtin_trap();
      if (e.skip_reason.empty() && (e.abort_burn_rate_5m < 2 || e.abort_burn_rate_5m > 10)) __builtin_trap();
    }
  }
  return 0;
}
