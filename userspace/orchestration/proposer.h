// The proposer (issue 29 §6): something that suggests the next experiment for
// one service. The default is none. The LLM one asks a model (Anthropic
// Messages or OpenAI chat completions, tool calling) that may only read
// (service_profile, slo_status, dependencies, recent_experiments) and answer
// with one propose_experiment call: a template of the catalogue and its
// parameters. It holds no write token: what it proposes is schema-checked
// against the template, judged by the validator (which reads the facts
// itself, never the proposal's claims) and rendered; a person approves it (or
// nobody, in shadow). Every turn is charged to the TokenLedger; past its
// budget the loop stops before the next call (budget_exhausted).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/orchestration/clock.h"
#include "userspace/orchestration/facts.h"
#include "userspace/orchestration/ledger.h"
#include "userspace/orchestration/validator.h"

namespace faultline {

enum class ProposerMode {
  Off,      // no proposals
  Shadow,   // proposals are recorded, never approvable
  Approve,  // a valid proposal waits for a person's approval
};
enum class ModelProvider { Anthropic, OpenAI };

[[nodiscard]] std::optional<ProposerMode> parse_proposer_mode(std::string_view s);
[[nodiscard]] const char* proposer_mode_name(ProposerMode m);
[[nodiscard]] std::optional<ModelProvider> parse_model_provider(std::string_view s);
[[nodiscard]] const char* model_provider_name(ModelProvider p);

// One tool call a model made.
struct ModelToolCall {
  std::string id;
  std::string name;
  nlohmann::json input;  // an object; the raw arguments when they were not JSON (`input_error` says why)
  std::string input_error;
};

// One model turn as the provider answered it (untrusted bytes, read by
// read_model_turn()).
struct ModelTurn {
  std::string text;  // prose the model wrote
  std::vector<ModelToolCall> tool_calls;
  TurnUsage usage;
  nlohmann::json assistant_message;  // what goes back to the provider as the model's turn
};

// An Anthropic Messages or OpenAI chat-completions answer (the body of a 200)
// as a turn. An error (bad input) names what is missing or malformed: not
// JSON, no content/choices, a tool call without a name or id, usage that is
// not counts.
[[nodiscard]] Result<ModelTurn> read_model_turn(ModelProvider provider, std::string_view body);

// The read-only tools' answers, and propose_experiment's JSON Schema (the
// template enum and each template's parameter bounds).
[[nodiscard]] nlohmann::json propose_experiment_schema();
// The tools offered to the model, in the provider's shape.
[[nodiscard]] nlohmann::json proposer_tools(ModelProvider provider);

// The experiments already run on the service (the fourth read-only tool).
class ExperimentHistory {
 public:
  virtual ~ExperimentHistory() = default;
  // Experiments on the service's instances created within `days` days of
  // now_unix_s: a JSON array of {id, kind, state, created_ms, ...}.
  [[nodiscard]] virtual Result<nlohmann::json> recent_experiments(const ServiceFacts& service, int64_t days,
                                                                  int64_t now_unix_s) = 0;
};

// A proposal as the model sent it in propose_experiment, read and checked.
struct ProposedExperiment {
  std::string template_name;  // empty when the model skipped (skip_reason)
  nlohmann::json params = nlohmann::json::object();
  std::string hypothesis_sli;  // burn_rate_5m, burn_rate_1h or budget_remaining
  double hypothesis_threshold = 0;
  std::string hypothesis_text;
  double abort_burn_rate_5m = 0;
  std::string skip_reason;
  std::string reasoning;
};

// The refusal of a proposal's shape: a code and the field.
struct ProposalRefusal {
  std::string code;  // unknown_template, unknown_field, missing_field, param_out_of_bounds, bad_field
  std::string field;
  std::string message;
};

// propose_experiment's arguments checked against its schema and the
// template's: every field named in a refusal.
[[nodiscard]] std::variant<ProposedExperiment, ProposalRefusal> read_proposed_experiment(const nlohmann::json& input);

struct ProposerConfig {
  ProposerMode mode = ProposerMode::Off;
  ModelProvider provider = ModelProvider::Anthropic;
  std::string url;  // the provider's base URL (https://api.anthropic.com); the path is added
  std::string model;
  std::string api_key;  // sent as x-api-key (Anthropic) or a bearer token (OpenAI); never a faultcp token
  int64_t max_tokens = 1024;
  int64_t max_turns = 8;  // model calls per run, whatever the budget
  uint64_t timeout_ns = 60'000'000'000;
  LedgerRates rates;
};

// How a run ended.
struct ProposerRun {
  // proposed: valid, rendered, waiting for approval (approve mode) or recorded
  // (shadow); skipped: the model chose not to propose (skip_reason); refused:
  // the proposal or the model's answer was refused (`code`); budget_exhausted;
  // failed: the model could not be reached or answered an error.
  std::string outcome;
  std::string code;  // refused: the reason's code; else empty
  std::string message;
  std::optional<ProposedExperiment> proposal;
  ValidationVerdict verdict;  // the validator's, when it ran
  nlohmann::json rendered;    // {template, version, template_sha256, params, instance, experiment} when proposed
  std::optional<ServiceInstance> instance;
  int64_t model_calls = 0;
  std::vector<std::string> tools_called;
  nlohmann::json ledger;  // TokenLedger::to_json()
  // {"outcome", "code", "message", "proposal", "verdict", "rendered", "model_calls", "tools_called", "ledger"}
  [[nodiscard]] nlohmann::json to_json() const;
};

// How the LLM proposer reaches its model: one POST, the answer's body.
class ModelTransport {
 public:
  virtual ~ModelTransport() = default;
  // POSTs the JSON body to the provider; the answer's status and body.
  [[nodiscard]] virtual Result<std::pair<int, std::string>> post(const nlohmann::json& body) = 0;
};

// The provider's HTTP API at config.url (HttpClient, the system's trust store).
[[nodiscard]] Result<std::unique_ptr<ModelTransport>> http_model_transport(const ProposerConfig& config);

class Proposer {
 public:
  virtual ~Proposer() = default;
  // One proposer loop for the named service.
  [[nodiscard]] virtual ProposerRun propose(const std::string& service, FactSource& facts, ExperimentHistory& history,
                                            const Clock& clock) = 0;
  [[nodiscard]] virtual ProposerMode mode() const = 0;
};

// The default: proposes nothing (every run is refused with proposer_off).
class NoProposer final : public Proposer {
 public:
  ProposerRun propose(const std::string& service, FactSource& facts, ExperimentHistory& history,
                      const Clock& clock) override;
  [[nodiscard]] ProposerMode mode() const override { return ProposerMode::Off; }
};

class LlmProposer final : public Proposer {
 public:
  // `draw` picks the instance a template acts on among n (mode: one); by default
  // a uniform random draw.
  LlmProposer(ProposerConfig config, std::unique_ptr<ModelTransport> transport,
              std::function<size_t(size_t n)> draw = {});
  ProposerRun propose(const std::string& service, FactSource& facts, ExperimentHistory& history,
                      const Clock& clock) override;
  [[nodiscard]] ProposerMode mode() const override { return config_.mode; }

 private:
  ProposerConfig config_;
  std::unique_ptr<ModelTransport> transport_;
  std::function<size_t(size_t)> draw_;
};

}  // namespace faultline
