// faultctl guard --trace-tools end to end: the real faultctl (as nobody when
// root) with real curl through its proxy, against a loopback stand-in model
// that answers with tool calls: a streamed Anthropic answer (SSE, chunked, its
// tool_use input in input_json_delta pieces), an OpenAI chat JSON answer and a
// streamed chat answer. Each call is an activity line (kind tool_call, rule
// tool:NAME) and a log line with its arguments; a secret in the arguments is
// masked in every output; the answer reaches the client unchanged.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "selftests/guard/guard_env.h"
#include "selftests/lib/child_process.h"
#include "selftests/proxy/proxy_fixture.h"
#include "selftests/tls/tls_harness.h"

namespace {

using fltest::CommandResult;
using fltest::UniqueFd;
using namespace std::chrono_literals;

const std::string kTraceFaultctl = FAULTCTL_PATH;
const std::string kTraceSecret = "AKIAQ3EGRXKJ5ZT7WHPM";  // AWS key shape, not a real key

std::string sse(const nlohmann::json& data, const std::string& event = "") {
  return (event.empty() ? "" : "event: " + event + "\n") + "data: " + data.dump() + "\n\n";
}

// The answers: by path, and for chat by whether the request asked to stream.
std::string anthropic_stream() {
  std::string s = sse({{"type", "message_start"},
                       {"message",
                        {{"id", "msg_1"},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", "claude-test"},
                         {"content", nlohmann::json::array()},
                         {"usage", {{"input_tokens", 3}, {"output_tokens", 1}}}}}},
                      "message_start");
  s += sse({{"type", "content_block_start"},
            {"index", 0},
            {"content_block",
             {{"type", "tool_use"}, {"id", "toolu_01"}, {"name", "bash"}, {"input", nlohmann::json::object()}}}},
           "content_block_start");
  for (const std::string& piece : {std::string(R"({"command": "aws configure set )"),
                                   "aws_access_key_id " + kTraceSecret.substr(0, 9), kTraceSecret.substr(9) + R"("})"})
    s += sse({{"type", "content_block_delta"},
              {"index", 0},
              {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}},
             "content_block_delta");
  s += sse({{"type", "content_block_stop"}, {"index", 0}}, "content_block_stop");
  s += sse({{"type", "message_delta"}, {"delta", {{"stop_reason", "tool_use"}}}, {"usage", {{"output_tokens", 9}}}},
           "message_delta");
  return s + sse({{"type", "message_stop"}}, "message_stop");
}

const std::string kChatJson =
    R"({"id":"c1","object":"chat.completion","created":1,"model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant",)"
    R"("content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/etc/hosts\"}"}}]},)"
    R"("finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})";

std::string chat_stream() {
  auto chunk = [](const nlohmann::json& delta) {
    return sse({{"id", "c2"},
                {"object", "chat.completion.chunk"},
                {"created", 1},
                {"model", "gpt-test"},
                {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}}}}});
  };
  std::string s = chunk({{"role", "assistant"},
                         {"tool_calls",
                          {{{"index", 0},
                            {"id", "call_a"},
                            {"type", "function"},
                            {"function", {{"name", "list_dir"}, {"arguments", ""}}}}}}});
  s += chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", "{\"dir\":\n"}}}}}}});
  s += chunk({{"tool_calls", {{{"index", 0}, {"function", {{"arguments", R"("/tmp"})"}}}}}}});
  return s + "data: [DONE]\n\n";
}

std::string chunked(const std::string& body) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += 37) {  // small chunks: events cross chunk boundaries
    const std::string piece = body.substr(at, 37);
    std::ostringstream size;
    size << std::hex << piece.size();
    out += size.str() + "\r\n" + piece + "\r\n";
  }
  return out + "0\r\n\r\n";
}

class ToolModelStandIn {
 public:
  ToolModelStandIn()
      : server_([](UniqueFd fd) {
          auto read = fltest::read_one_request(fd.get());
          if (!read) return;
          const std::string& data = *read;
          std::string resp;
          if (data.find("/chat/completions") == std::string::npos)
            resp =
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n" +
                chunked(anthropic_stream());
          else if (data.find("\"stream\":true") != std::string::npos)
            resp =
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n" +
                chunked(chat_stream());
          else
            resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                   std::to_string(kChatJson.size()) + "\r\nConnection: close\r\n\r\n" + kChatJson;
          (void)::send(fd.get(), resp.data(), resp.size(), MSG_NOSIGNAL);
        }) {}
  [[nodiscard]] std::string base() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

 private:
  fltest::ScriptServer server_;
};

class GuardTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    env_ = fltest::guard_env(dir_.path(), {"FAULTLINE_STATE_DIR=" + dir_.file("state")});
  }

  CommandResult guard(std::vector<std::string> flags, std::vector<std::string> command) {
    return fltest::run_command(fltest::guard_argv(kTraceFaultctl, flags, dir_.file("activity.jsonl"), command),
                               {.env = env_}, 90s);
  }

  CommandResult post(std::vector<std::string> flags, const std::string& url, const nlohmann::json& body) {
    fltest::write_file(dir_.file("body.json"), body.dump());
    EXPECT_EQ(::chmod(dir_.file("body.json").c_str(), 0644), 0);
    return guard(std::move(flags),
                 {"curl", "-sS", "--max-time", "20", "-H", "Content-Type: application/json", "-H",
                  "anthropic-version: 2023-06-01", "--data-binary", "@" + dir_.file("body.json"), url});
  }

  std::string activity_text() {
    std::ifstream in(dir_.file("activity.jsonl"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::vector<nlohmann::json> tool_lines() {
    std::istringstream in(activity_text());
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("kind", "") == "tool_call") out.push_back(j);
    }
    return out;
  }

  fltest::TempDir dir_;
  std::vector<std::string> env_;
};

const nlohmann::json kMessagesRequest = {{"model", "claude-test"},
                                         {"max_tokens", 16},
                                         {"stream", true},
                                         {"messages", {{{"role", "user"}, {"content", "Set up the AWS CLI."}}}}};

TEST_F(GuardTraceTest, AStreamedAnthropicToolUseIsLoggedWithTheSecretMaskedAndTheStreamUnchanged) {
  ToolModelStandIn model;
  auto r = post({"--trace-tools"}, model.base() + "/v1/messages", kMessagesRequest);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, anthropic_stream());  // the client got the answer byte for byte
  const auto lines = tool_lines();
  ASSERT_EQ(lines.size(), 1u) << activity_text();
  EXPECT_EQ(lines[0].value("rule", ""), "tool:bash") << lines[0].dump();
  EXPECT_EQ(lines[0].value("verdict", ""), "allow") << lines[0].dump();
  EXPECT_NE(r.err.find(R"(tool_call bash (toolu_01) {"command": "aws configure set aws_access_key_id ****)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--trace-tools"), std::string::npos) << r.err;
  // The secret is in no output, log or record; only the client's answer has it.
  EXPECT_EQ(r.err.find(kTraceSecret), std::string::npos) << r.err;
  EXPECT_EQ(activity_text().find(kTraceSecret), std::string::npos);
}

TEST_F(GuardTraceTest, OpenAIChatToolCallsFromJsonAndFromAStream) {
  ToolModelStandIn model;
  nlohmann::json chat = {{"model", "gpt-test"}, {"messages", {{{"role", "user"}, {"content", "Look around."}}}}};
  auto r = post({"--trace-tools"}, model.base() + "/v1/chat/completions", chat);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, kChatJson);
  EXPECT_NE(r.err.find(R"(tool_call read_file (call_1) {"path":"/etc/hosts"})"), std::string::npos) << r.err;

  chat["stream"] = true;
  r = post({"--trace-tools"}, model.base() + "/v1/chat/completions", chat);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, chat_stream());
  // The model's raw newline between tokens is shown escaped: one log line per call.
  EXPECT_NE(r.err.find(R"(tool_call list_dir (call_a) {"dir":\n"/tmp"})"), std::string::npos) << r.err;
  const auto lines = tool_lines();  // both runs appended to the one activity log
  ASSERT_EQ(lines.size(), 2u) << activity_text();
  EXPECT_EQ(lines[0].value("rule", ""), "tool:read_file");
  EXPECT_EQ(lines[1].value("rule", ""), "tool:list_dir");
}

TEST_F(GuardTraceTest, WithoutTheFlagNoToolCallIsLogged) {
  ToolModelStandIn model;
  auto r = post({}, model.base() + "/v1/messages", kMessagesRequest);
  ASSERT_TRUE(r.status.is(0)) << r.describe();
  EXPECT_EQ(r.out, anthropic_stream());
  EXPECT_TRUE(tool_lines().empty()) << activity_text();
  EXPECT_EQ(r.err.find("tool_call"), std::string::npos) << r.err;
}

}  // namespace
