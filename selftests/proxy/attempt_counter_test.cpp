// The attempt-counting rule of HTTP faults (docs/l7.md, "Counting attempts"):
// the counter alone with a clock the test moves, then one HttpSession driven
// as the relay drives it, with a client that retries in its own loop and sends
// x-stainless-retry-count: 0 every time (as Claude Code does).
#include "userspace/proxy/attempt_counter.h"

#include <gtest/gtest.h>

#include <chrono>

#include "userspace/proxy/http_session.h"

namespace {

using faultline::AttemptCounter;
using faultline::RequestFingerprint;
using namespace std::chrono_literals;

RequestFingerprint print_of(std::string_view body, std::string client = "127.0.0.1") {
  faultline::BodyHash h;
  h.update(body);
  return {std::move(client), "POST", "/v1/messages", h.value()};
}

TEST(AttemptCounter, TheSameFingerprintWithinTheWindowIsTheNextAttempt) {
  AttemptCounter c(60s);
  const auto t0 = AttemptCounter::Clock::time_point{} + 1h;
  EXPECT_EQ(c.attempt(print_of("{\"a\":1}"), 0, t0), 0);
  EXPECT_EQ(c.attempt(print_of("{\"a\":1}"), 0, t0 + 30s), 1);
  // The window runs from the last sighting: a slow backoff still counts.
  EXPECT_EQ(c.attempt(print_of("{\"a\":1}"), 0, t0 + 80s), 2);
}

TEST(AttemptCounter, ADifferentBodyPathOrClientIsANewRequest) {
  AttemptCounter c(60s);
  const auto t0 = AttemptCounter::Clock::time_point{} + 1h;
  EXPECT_EQ(c.attempt(print_of("{\"a\":1}"), 0, t0), 0);
  EXPECT_EQ(c.attempt(print_of("{\"a\":2}"), 0, t0 + 1s), 0);
  EXPECT_EQ(c.attempt(print_of("{\"a\":1}", "10.0.0.2"), 0, t0 + 1s), 0);
  RequestFingerprint other_path = print_of("{\"a\":1}");
  other_path.path = "/v1/messages/count_tokens";
  EXPECT_EQ(c.attempt(other_path, 0, t0 + 1s), 0);
  EXPECT_EQ(c.attempt(print_of("{\"a\":1}"), 0, t0 + 2s), 1);
  EXPECT_EQ(c.tracked(), 4u);
}

TEST(AttemptCounter, PastTheWindowTheSameRequestIsNewAgain) {
  AttemptCounter c(60s);
  const auto t0 = AttemptCounter::Clock::time_point{} + 1h;
  EXPECT_EQ(c.attempt(print_of("x"), 0, t0), 0);
  EXPECT_EQ(c.attempt(print_of("x"), 0, t0 + 61s), 0);
  EXPECT_EQ(c.attempt(print_of("x"), 0, t0 + 62s), 1);
}

TEST(AttemptCounter, ARetryHeaderAboveZeroIsBelievedAndTheLargerCountWins) {
  AttemptCounter c(60s);
  const auto t0 = AttemptCounter::Clock::time_point{} + 1h;
  // An SDK numbers its retries: 0, 1, 2; the fingerprint agrees.
  EXPECT_EQ(c.attempt(print_of("sdk"), 0, t0), 0);
  EXPECT_EQ(c.attempt(print_of("sdk"), 1, t0 + 1s), 1);
  EXPECT_EQ(c.attempt(print_of("sdk"), 2, t0 + 2s), 2);
  // A retry whose body changed still says it is one.
  EXPECT_EQ(c.attempt(print_of("changed"), 3, t0 + 3s), 3);
}

TEST(AttemptCounter, ARequestThatGotThroughEndsItsChain) {
  AttemptCounter c(60s);
  const auto t0 = AttemptCounter::Clock::time_point{} + 1h;
  EXPECT_EQ(c.attempt(print_of("x"), 0, t0), 0);
  EXPECT_EQ(c.attempt(print_of("x"), 0, t0 + 1s), 1);
  c.settle(print_of("x"));
  EXPECT_EQ(c.attempt(print_of("x"), 0, t0 + 2s), 0);
}

// ---- in the session, as the relay drives it --------------------------------

// What the session did with one request: answered it itself (the status) or sent it on.
struct Outcome {
  bool answered = false;
  int status = 0;
  std::string sent;  // what went upstream
};

Outcome exchange(faultline::HttpSession& s, const faultline::HttpRules& rules, std::string input) {
  Outcome o;
  for (int i = 0; i < 100; ++i) {
    const faultline::HttpStep st = s.client_step(input, rules);
    switch (st.act) {
      case faultline::HttpAct::consume:
      case faultline::HttpAct::drop:
        input.erase(0, st.bytes);
        break;
      case faultline::HttpAct::forward:
        o.sent += input.substr(0, st.bytes);
        input.erase(0, st.bytes);
        break;
      case faultline::HttpAct::send_head:
        o.sent += s.head();
        s.head_sent();
        break;
      case faultline::HttpAct::respond: {
        const std::string a = s.take_answer();
        o.answered = true;
        o.status = std::stoi(a.substr(9, 3));
        s.answer_sent();
        return o;
      }
      case faultline::HttpAct::wait: {  // the upstream answers
        const std::string resp = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        (void)s.server_step(resp);
        return o;
      }
      default:
        ADD_FAILURE() << "unexpected step " << int(st.act);
        return o;
    }
  }
  ADD_FAILURE() << "the session never finished the request";
  return o;
}

std::string messages_request(const std::string& body) {
  return "POST /v1/messages HTTP/1.1\r\nhost: api.anthropic.test\r\nx-stainless-retry-count: 0\r\n"
         "content-type: application/json\r\ncontent-length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST(AttemptCounterSession, ARetryLoopWithoutCountingIsFaultedExactlyNTimes) {
  faultline::HttpFault f;
  f.name = "llm_overloaded";
  f.type = faultline::HttpFaultType::llm;
  f.preset = faultline::LlmPreset::overloaded;
  f.provider = faultline::LlmProvider::anthropic;
  f.attempts = 2;
  faultline::HttpRules rules;
  rules.faults.push_back({f, std::make_shared<std::atomic<uint64_t>>(0)});

  const std::string body = R"({"model":"claude-test","max_tokens":5,"messages":[{"role":"user","content":"hi"}]})";
  // Each attempt on a connection of its own, from the same client.
  std::vector<Outcome> outs;
  for (int i = 0; i < 3; ++i) {
    faultline::HttpSession s("api.anthropic.test", 7);
    s.set_client("127.0.0.1");
    outs.push_back(exchange(s, rules, messages_request(body)));
  }
  EXPECT_TRUE(outs[0].answered && outs[0].status == 529) << outs[0].status;
  EXPECT_TRUE(outs[1].answered && outs[1].status == 529) << outs[1].status;
  ASSERT_FALSE(outs[2].answered);
  // The third went on whole: the head and the body held while it was fingerprinted.
  EXPECT_EQ(outs[2].sent, messages_request(body));
  EXPECT_EQ(rules.faults[0].hits->load(), 2u);

  // A different request (another body) on a kept-alive connection is faulted again.
  faultline::HttpSession s("api.anthropic.test", 7);
  s.set_client("127.0.0.1");
  Outcome other = exchange(s, rules, messages_request(R"({"other":true})"));
  EXPECT_TRUE(other.answered && other.status == 529);
}

}  // namespace
