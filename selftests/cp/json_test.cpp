// The listing's JSON, written as text without a DOM (append_experiment_json),
// against the DOM the rest of the API builds (experiment_json): the same text
// for what faultcp stores, the same document for anything else.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cp/api/control_plane.h"

namespace {

using faultline::cp::Experiment;

std::string as_text(const Experiment& e) {
  std::string out;
  faultline::cp::append_experiment_json(out, e);
  return out;
}

Experiment sample() {
  Experiment e;
  e.id = 42;
  e.workspace_id = 7;
  e.agent_id = 9;
  e.spec = nlohmann::json{{"kind", "loss"}, {"percent", 1}, {"target", "10.0.0.1"}}.dump();
  e.state = "running";
  e.detail = "started";
  e.created_ms = 1700000000000;
  e.updated_ms = 1700000000123;
  return e;
}

TEST(ExperimentJson, SameTextAsTheDomForWhatFaultcpStores) {
  std::vector<Experiment> cases;
  cases.push_back(sample());
  Experiment full = sample();
  full.record = nlohmann::json{{"injected", 3}, {"note", "caf\u00e9 \"quoted\""}}.dump();
  full.lease_until_ms = 1700000060000;
  full.started_ms = 1700000000200;
  full.stop_requested = true;
  cases.push_back(full);
  Experiment odd = sample();
  // Every escape nlohmann writes: quotes, backslash, the short forms, other
  // control characters as \u00XX, DEL and multi-byte UTF-8 as they are.
  odd.detail = std::string("a\"b\\c\b\f\n\r\t") + '\x01' + '\x1f' + '\x7f' + "\u00e9\u4e2d\U0001F600";
  odd.state = "cancelled";
  odd.lease_until_ms = -1;
  cases.push_back(odd);
  for (const auto& e : cases) EXPECT_EQ(as_text(e), faultline::cp::experiment_json(e).dump());
}

TEST(ExperimentJson, SameDocumentForAnythingElse) {
  Experiment e = sample();
  e.spec = "{ \"kind\" : \"delay\" }";  // not the canonical text: copied, still the same document
  e.record = "[1, 2";                   // not JSON: null, as the DOM shows it
  EXPECT_EQ(nlohmann::json::parse(as_text(e)), faultline::cp::experiment_json(e));
  e.spec = "not json";  // an empty object, as the DOM shows it
  EXPECT_EQ(nlohmann::json::parse(as_text(e)), faultline::cp::experiment_json(e));
  EXPECT_EQ(nlohmann::json::parse(as_text(e))["spec"], nlohmann::json::object());
}

TEST(ExperimentJson, InvalidUtf8IsReplacedNotFatal) {
  Experiment e = sample();
  // A lone continuation byte, a truncated sequence, an overlong form, a surrogate.
  e.detail = std::string("x\x80y\xe2\x82z\xc0\xafw\xed\xa0\x80v");
  const auto doc = nlohmann::json::parse(as_text(e));
  EXPECT_EQ(doc["detail"], "x\uFFFDy\uFFFD\uFFFDz\uFFFD\uFFFDw\uFFFD\uFFFD\uFFFDv");
}

}  // namespace
