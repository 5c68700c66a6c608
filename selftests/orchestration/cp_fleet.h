// One workspace of a faultcp the orchestration route tests serve: a user's
// token, and one enrolled agent that takes experiments and reports them as
// faultd would. Shared by the scenario and schedule suites.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cp_client.h"

namespace florch {

struct CpFleet {
  uint16_t port = 0;
  std::string token, agent_token;
  int64_t agent = 0;

  // A request as the workspace's user (or as `as`, another token).
  [[nodiscard]] fltest::CpReply call(const std::string& method, const std::string& path, const std::string& body = "",
                                     const std::string& as = "") const {
    return fltest::cp_request(port, method, path, as.empty() ? token : as, body);
  }
  // The agent's next experiment (its id), long-polling for up to `wait_ms`
  // (faultcp may hold each poll for less); 0 when none came.
  int64_t take(int wait_ms = 5000) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    do {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      auto r = fltest::cp_request(
          port, "GET",
          "/v1/agents/" + std::to_string(agent) + "/next?wait_ms=" + std::to_string(std::max<int64_t>(left, 0)),
          agent_token, "", static_cast<int>(left) + 5000);
      const nlohmann::json j = r.json();
      if (r.status == 200 && j.is_object() && j["experiment"].is_object())
        return j["experiment"].value("id", int64_t{0});
      if (r.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a replica not up yet
    } while (std::chrono::steady_clock::now() < until);
    return 0;
  }
  // As faultd reports a run: running, then `outcome`.
  void report(int64_t exp, const std::string& outcome) const {
    for (const std::string& type : {std::string("running"), outcome}) {
      auto r = fltest::cp_request(port, "POST", "/v1/agents/" + std::to_string(agent) + "/events", agent_token,
                                  nlohmann::json{{"experiment_id", exp}, {"type", type}}.dump());
      EXPECT_EQ(r.status, 200) << type << ": " << r.describe();
    }
  }
  [[nodiscard]] size_t experiments() const { return call("GET", "/v1/experiments").json()["experiments"].size(); }
};

// Signs up workspace `name` on the faultcp at `port` and enrolls one agent in it.
inline CpFleet cp_signup(uint16_t port, const std::string& name) {
  CpFleet f;
  f.port = port;
  auto r = fltest::cp_request(
      port, "POST", "/v1/auth/signup", "",
      nlohmann::json{{"email", name + "@example.com"}, {"password", "correct horse battery"}, {"workspace", name}}
          .dump());
  EXPECT_EQ(r.status, 201) << r.describe();
  f.token = r.json().value("token", "");
  auto enr = f.call("POST", "/v1/tokens", R"({"kind":"enrollment"})").json().value("token", "");
  auto reg = fltest::cp_request(port, "POST", "/v1/agents/register", enr, R"({"hostname":")" + name + R"(-host"})");
  EXPECT_EQ(reg.status, 201) << reg.describe();
  f.agent = reg.json().value("agent_id", int64_t{0});
  f.agent_token = reg.json().value("token", "");
  return f;
}

}  // namespace florch
