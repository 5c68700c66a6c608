// A stand-in model server for the proposer's tests: an HTTP/1.1 server on
// 127.0.0.1 that answers as Anthropic's Messages API or OpenAI's chat
// completions would, each turn from the test's script, and keeps each request
// it read whole (head and JSON body). Never the internet.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "userspace/orchestration/proposer.h"

namespace florch {

// A scripted turn, written once and sent in the provider's shape.
struct Call {
  std::string name;
  nlohmann::json input;
};
struct Turn {
  std::string text;
  std::vector<Call> calls;
  int64_t input_tokens = 400, output_tokens = 100;
};
// The answer to the turn-th request (1-based), given the request's body.
using Script = std::function<Turn(int turn, const nlohmann::json& request)>;

// The turn as the provider's answer body.
[[nodiscard]] std::string provider_body(faultline::ModelProvider p, const Turn& t, int turn);

// A good proposal: cpu_stress_one at load 50 for 60 s, its hypothesis and
// abort limit, with reasoning.
[[nodiscard]] nlohmann::json good_proposal();
// Reads the profile and the SLO first, then proposes `proposal`.
[[nodiscard]] Script read_then(nlohmann::json proposal);

class StandInModel {
 public:
  StandInModel(faultline::ModelProvider p, Script script);
  ~StandInModel();
  StandInModel(const StandInModel&) = delete;
  StandInModel& operator=(const StandInModel&) = delete;

  [[nodiscard]] std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  [[nodiscard]] int calls() const { return calls_.load(); }
  struct Seen {
    std::string head;
    nlohmann::json body;
  };
  [[nodiscard]] std::vector<Seen> seen();
  // A new script from its first turn on; seen() and calls() start again.
  void set_script(Script script);

 private:
  void serve();

  faultline::ModelProvider p_;
  Script script_;  // under mu_
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread th_;
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0};
  std::mutex mu_;
  std::vector<Seen> seen_;
};

}  // namespace florch
