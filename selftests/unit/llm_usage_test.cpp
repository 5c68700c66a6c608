// Usage from LLM responses as the proxy sees them (raw HTTP/1.1, chunked or
// not, any split): transcripts shaped like the providers' documented answers;
// the filter that removes the injected usage chunk, byte-exact otherwise.
#include "userspace/guard/llm_usage.h"

#include <gtest/gtest.h>

namespace faultline {
namespace llm_usage_test {

// An HTTP/1.1 response whose body is sent as the given chunks (chunked framing).
std::string chunked_response(const std::string& content_type, const std::vector<std::string>& chunks, int status = 200,
                             const std::string& extra = "") {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " OK\r\nContent-Type: " + content_type +
                  "\r\nTransfer-Encoding: chunked\r\n" + extra + "\r\n";
  for (const auto& c : chunks) {
    char size[20];
    std::snprintf(size, sizeof(size), "%zx", c.size());
    r += std::string(size) + "\r\n" + c + "\r\n";
  }
  return r + "0\r\n\r\n";
}

std::string sized_response(const std::string& content_type, const std::string& body, int status = 200) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct Read {
  std::optional<LlmUsage> usage;
  bool ended = false;
  std::string problem;
};

Read read_in_pieces(LlmEndpoint e, std::string_view bytes, size_t piece, bool finish = true) {
  LlmUsageReader r(e);
  for (size_t at = 0; at < bytes.size(); at += piece) r.feed(bytes.substr(at, piece));
  if (finish) r.finish();
  return Read{r.usage(), r.ended(), std::string(r.problem())};
}

// Every split of the same bytes reads the same usage.
void expect_usage(LlmEndpoint e, const std::string& bytes, const LlmUsage& want, bool ended = true) {
  for (size_t piece : {size_t{1}, size_t{2}, size_t{13}, size_t{512}, bytes.size()}) {
    const Read r = read_in_pieces(e, bytes, piece);
    ASSERT_TRUE(r.usage.has_value()) << "pieces of " << piece << ": " << r.problem;
    EXPECT_EQ(*r.usage, want) << "pieces of " << piece;
    EXPECT_EQ(r.ended, ended) << "pieces of " << piece;
  }
}

// Anthropic Messages streaming, as documented: message_start carries the
// input usage, message_delta the cumulative output.
const std::vector<std::string> kAnthropicEvents = {
    "event: message_start\ndata: "
    R"({"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":5,"cache_read_input_tokens":10,"output_tokens":1}}})"
    "\n\n",
    "event: content_block_start\ndata: "
    R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"
    "\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: "
    R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}})"
    "\n\n",
    "event: message_delta\ndata: "
    R"({"type":"message_delta","delta":{"stop_reason":null,"stop_sequence":null},"usage":{"output_tokens":15}})"
    "\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: "
    R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}})"
    "\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
};

TEST(LlmUsage, AnthropicStreamKeepsTheLastCumulativeDelta) {
  expect_usage(LlmEndpoint::AnthropicMessages, chunked_response("text/event-stream; charset=utf-8", kAnthropicEvents),
               LlmUsage{"claude-sonnet-4-5-20250929", 25, 42, 10, 5, 0});
}

TEST(LlmUsage, AnthropicStreamCutKeepsTheLastUsageSeen) {
  // Cut after the first message_delta: no terminal chunk, no message_stop.
  std::string bytes = chunked_response("text/event-stream", kAnthropicEvents);
  const size_t cut = bytes.find("content_block_stop");
  const Read r = read_in_pieces(LlmEndpoint::AnthropicMessages, std::string_view(bytes).substr(0, cut), 7);
  ASSERT_TRUE(r.usage.has_value());
  EXPECT_EQ(r.usage->output, 15u);
  EXPECT_EQ(r.usage->input, 25u);
  EXPECT_FALSE(r.ended);
  // Cut before message_start ended: nothing.
  const size_t early = bytes.find("cache_creation");
  EXPECT_FALSE(read_in_pieces(LlmEndpoint::AnthropicMessages, std::string_view(bytes).substr(0, early), 3).usage);
}

TEST(LlmUsage, AnthropicJson) {
  const std::string body =
      R"({"id":"msg_01","type":"message","role":"assistant","model":"claude-opus-4-1-20250805","content":[{"type":"text","text":"Hi"}],)"
      R"("stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":503}})";
  expect_usage(LlmEndpoint::AnthropicMessages, sized_response("application/json", body),
               LlmUsage{"claude-opus-4-1-20250805", 2095, 503, 1800, 0, 0});
  expect_usage(LlmEndpoint::AnthropicMessages,
               chunked_response("application/json", {body.substr(0, 40), body.substr(40)}),
               LlmUsage{"claude-opus-4-1-20250805", 2095, 503, 1800, 0, 0});
}

const std::string kChatUsageChunk =
    R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[],)"
    R"("usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":4}}})";

std::vector<std::string> chat_events(bool with_usage) {
  std::vector<std::string> e;
  for (const char* word : {"Hello", " there", "!"}) {
    e.push_back(
        std::string("data: ") +
        R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":")" +
        word + R"("},"logprobs":null,"finish_reason":null}]})" + "\n\n");
  }
  e.push_back(
      "data: "
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]})"
      "\n\n");
  if (with_usage) e.push_back("data: " + kChatUsageChunk + "\n\n");
  e.push_back("data: [DONE]\n\n");
  return e;
}

TEST(LlmUsage, OpenAIChatStreamFinalUsageChunk) {
  expect_usage(LlmEndpoint::OpenAIChat, chunked_response("text/event-stream", chat_events(true)),
               LlmUsage{"gpt-4o-2024-08-06", 19, 10, 3, 0, 4});
  // Without include_usage there is none, but the stream ended.
  const Read r = read_in_pieces(LlmEndpoint::OpenAIChat, chunked_response("text/event-stream", chat_events(false)), 5);
  EXPECT_FALSE(r.usage.has_value());
  EXPECT_TRUE(r.ended);
}

TEST(LlmUsage, OpenAIChatJson) {
  const std::string body =
      R"({"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"o3-mini-2025-01-31","choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],)"
      R"("usage":{"prompt_tokens":12,"completion_tokens":140,"total_tokens":152,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":128,"audio_tokens":0}}})";
  expect_usage(LlmEndpoint::OpenAIChat, sized_response("application/json", body),
               LlmUsage{"o3-mini-2025-01-31", 12, 140, 0, 0, 128});
}

const std::string kResponseObject =
    R"({"id":"resp_1","object":"response","created_at":1741476542,"status":"completed","model":"gpt-4.1-2025-04-14","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}],)"
    R"("usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":8},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":123}})";

TEST(LlmUsage, OpenAIResponsesTerminalEventAndJson) {
  const std::vector<std::string> events = {
      "event: response.created\ndata: "
      R"({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-4.1-2025-04-14","output":[],"usage":null}})"
      "\n\n",
      "event: response.output_text.delta\ndata: "
      R"({"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"})"
      "\n\n",
      "event: response.completed\ndata: " +
          std::string(R"({"type":"response.completed","sequence_number":9,"response":)") + kResponseObject + "}\n\n",
  };
  const LlmUsage want{"gpt-4.1-2025-04-14", 36, 87, 8, 0, 20};
  expect_usage(LlmEndpoint::OpenAIResponses, chunked_response("text/event-stream", events), want);
  expect_usage(LlmEndpoint::OpenAIResponses, sized_response("application/json", kResponseObject), want);
  // Cut before the terminal event: the model is known, the usage is not.
  const std::string cut = chunked_response("text/event-stream", {events[0], events[1]});
  const Read r = read_in_pieces(LlmEndpoint::OpenAIResponses, cut.substr(0, cut.size() - 5), 3);
  EXPECT_FALSE(r.usage.has_value());
  EXPECT_FALSE(r.ended);
}

TEST(LlmUsage, LineEndingsOfEveryKind) {
  std::string lf;
  for (const auto& e : kAnthropicEvents) lf += e;
  std::string crlf, cr;
  for (char c : lf) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    cr += c == '\n' ? '\r' : c;
  }
  const LlmUsage want{"claude-sonnet-4-5-20250929", 25, 42, 10, 5, 0};
  for (const std::string& body : {crlf, cr}) {
    // Body until close: no length, no chunking.
    expect_usage(LlmEndpoint::AnthropicMessages, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body,
                 want);
  }
}

TEST(LlmUsage, NoUsageFromErrorsCompressionOrBadFraming) {
  const std::string err =
      R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"usage":{"output_tokens":9}})";
  EXPECT_FALSE(read_in_pieces(LlmEndpoint::AnthropicMessages, sized_response("application/json", err, 529), 4).usage);
  const Read gz =
      read_in_pieces(LlmEndpoint::OpenAIChat,
                     chunked_response("application/json", {"\x1f\x8b binary"}, 200, "Content-Encoding: gzip\r\n"), 4);
  EXPECT_FALSE(gz.usage.has_value());
  EXPECT_NE(gz.problem.find("gzip"), std::string::npos);
  const Read bad =
      read_in_pieces(LlmEndpoint::OpenAIChat, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 1);
  EXPECT_FALSE(bad.usage.has_value());
  EXPECT_EQ(bad.problem, "a bad chunk size");
}

TEST(LlmUsage, InterimResponsesAreSkipped) {
  const std::string body = R"({"model":"gpt-4o","usage":{"prompt_tokens":1,"completion_tokens":2}})";
  expect_usage(LlmEndpoint::OpenAIChat, "HTTP/1.1 100 Continue\r\n\r\n" + sized_response("application/json", body),
               LlmUsage{"gpt-4o", 1, 2, 0, 0, 0});
}

// The body a client sees from the filter's output: de-chunked by the reader's
// own framing rules would hide a bug in them, so by hand here.
std::string dechunk(const std::string& http, std::string* head) {
  const size_t end = http.find("\r\n\r\n");
  *head = http.substr(0, end + 4);
  std::string body;
  size_t at = end + 4;
  while (at < http.size()) {
    const size_t eol = http.find("\r\n", at);
    const size_t n = std::stoul(http.substr(at, eol - at), nullptr, 16);
    if (n == 0) {
      EXPECT_EQ(http.substr(eol), "\r\n\r\n");
      break;
    }
    body += http.substr(eol + 2, n);
    EXPECT_EQ(http.substr(eol + 2 + n, 2), "\r\n");
    at = eol + 2 + n + 2;
  }
  return body;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += e;
  return s;
}

TEST(LlmStreamFilter, RemovesOnlyTheInjectedUsageChunk) {
  const std::string upstream = chunked_response("text/event-stream", chat_events(true));
  std::string want_head;
  (void)dechunk(upstream, &want_head);
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, upstream.size()}) {
    LlmStreamFilter f;
    std::string out;
    for (size_t at = 0; at < upstream.size(); at += piece) out += f.feed(std::string_view(upstream).substr(at, piece));
    out += f.finish();
    std::string head;
    const std::string body = dechunk(out, &head);
    EXPECT_EQ(head, want_head) << piece;
    EXPECT_EQ(body, joined(chat_events(false))) << piece;  // byte-exact without the usage chunk
    EXPECT_TRUE(f.removed_usage_chunk());
    ASSERT_TRUE(f.usage().has_value());
    EXPECT_EQ(*f.usage(), (LlmUsage{"gpt-4o-2024-08-06", 19, 10, 3, 0, 4}));
  }
}

TEST(LlmStreamFilter, ByteExactWhenThereIsNothingToRemove) {
  // CRLF events and a comment: the same bytes in the body.
  std::string body = ": keep-alive\r\n\r\n";
  for (const auto& e : chat_events(false)) {
    for (char c : e) body += c == '\n' ? std::string("\r\n") : std::string(1, c);
  }
  const std::string upstream = chunked_response("text/event-stream", {body.substr(0, 100), body.substr(100)});
  LlmStreamFilter f;
  std::string out;
  for (size_t at = 0; at < upstream.size(); at += 5) out += f.feed(std::string_view(upstream).substr(at, 5));
  out += f.finish();
  std::string head;
  EXPECT_EQ(dechunk(out, &head), body);
  EXPECT_FALSE(f.removed_usage_chunk());
  // A JSON answer of known length passes untouched.
  const std::string json = sized_response("application/json", R"({"model":"m","choices":[],"usage":{}})");
  LlmStreamFilter g;
  std::string passed = g.feed(json);
  passed += g.finish();
  EXPECT_EQ(passed, json);
}

TEST(LlmStreamFilter, ACutStreamGivesWhatWasHeld) {
  const std::string body = joined(chat_events(true));
  const std::string upstream = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body;
  const std::string cut = upstream.substr(0, upstream.size() - 9);  // inside "data: [DONE]\n\n"
  LlmStreamFilter f;
  std::string out = f.feed(cut);
  out += f.finish();
  std::string want = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + joined(chat_events(false));
  EXPECT_EQ(out, want.substr(0, want.size() - 9));
}

// The round trip a guard makes: the request gets include_usage, the upstream
// answers with the usage chunk, the client sees the stream it asked for.
TEST(LlmStreamFilter, IncludeUsageRoundTrip) {
  LlmRequestRewriter rw(LlmEndpoint::OpenAIChat, {}, true);
  std::string sent = rw.feed(R"({"model":"gpt-4o","stream":true,"messages":[]})");
  sent += rw.finish();  // after feed(): the operands of + have no order
  ASSERT_TRUE(rw.usage_injected());
  ASSERT_NE(sent.find(R"("include_usage":true)"), std::string::npos);
  LlmStreamFilter f;
  std::string out = f.feed(chunked_response("text/event-stream", chat_events(true)));
  out += f.finish();
  std::string head;
  EXPECT_EQ(dechunk(out, &head), joined(chat_events(false)));
  EXPECT_EQ(f.usage()->output, 10u);
}

// --trace-tools: the tool calls of an answer, the same at every split.
std::vector<LlmToolCall> tools_in_pieces(LlmEndpoint e, std::string_view bytes, size_t piece) {
  LlmUsageReader r(e, true);
  for (size_t at = 0; at < bytes.size(); at += piece) r.feed(bytes.substr(at, piece));
  r.finish();
  return r.tool_calls();
}

void expect_tools(LlmEndpoint e, const std::string& bytes, const std::vector<LlmToolCall>& want) {
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, bytes.size()})
    EXPECT_EQ(tools_in_pieces(e, bytes, piece), want) << "pieces of " << piece;
}

TEST(LlmToolCalls, AnthropicStreamJoinsInputJsonDeltasPerBlock) {
  const std::vector<std::string> events = {
      kAnthropicEvents[0],
      "event: content_block_start\ndata: "
      R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"
      "\n\n",
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
      "event: content_block_start\ndata: "
      R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}})"
      "\n\n",
      "event: content_block_delta\ndata: "
      R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"loc"}})"
      "\n\n",
      "event: content_block_delta\ndata: "
      R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ation\": \"Paris\"}"}})"
      "\n\n",
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
      "event: content_block_start\ndata: "
      R"({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"now","input":{}}})"
      "\n\n",
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
  };
  expect_tools(LlmEndpoint::AnthropicMessages, chunked_response("text/event-stream", events),
               {{"toolu_01", "get_weather", R"({"location": "Paris"})", false}, {"toolu_02", "now", "{}", false}});
  // Without --trace-tools nothing is collected.
  LlmUsageReader off(LlmEndpoint::AnthropicMessages);
  off.feed(chunked_response("text/event-stream", events));
  off.finish();
  EXPECT_TRUE(off.tool_calls().empty());
}

TEST(LlmToolCalls, AnthropicJsonToolUseBlocks) {
  const std::string body =
      R"({"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"ok"},)"
      R"({"type":"tool_use","id":"toolu_9","name":"bash","input":{"command":"ls -l"}}],"stop_reason":"tool_use",)"
      R"("usage":{"input_tokens":3,"output_tokens":1}})";
  expect_tools(LlmEndpoint::AnthropicMessages, sized_response("application/json", body),
               {{"toolu_9", "bash", R"({"command":"ls -l"})", false}});
}

TEST(LlmToolCalls, OpenAIChatStreamDeltasByIndexListedWhenTheStreamEnds) {
  auto chunk = [](const std::string& delta) {
    return "data: "
           R"({"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":)" +
           delta + R"(,"finish_reason":null}]})" + "\n\n";
  };
  const std::vector<std::string> events = {
      chunk(
          R"({"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]})"),
      chunk(
          R"({"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"ls","arguments":"{}"}}]})"),
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]})"),
      chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":"\"/etc/hosts\"}"}}]})"),
      "data: [DONE]\n\n",
  };
  expect_tools(LlmEndpoint::OpenAIChat, chunked_response("text/event-stream", events),
               {{"call_a", "read_file", R"({"path":"/etc/hosts"})", false}, {"call_b", "ls", "{}", false}});
}

TEST(LlmToolCalls, OpenAIChatJsonAndResponsesFunctionCalls) {
  const std::string chat =
      R"({"id":"c2","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,)"
      R"("tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":\"x\"}"}}]},"finish_reason":"tool_calls"}]})";
  expect_tools(LlmEndpoint::OpenAIChat, sized_response("application/json", chat),
               {{"call_1", "search", R"({"q":"x"})", false}});
  const std::string item =
      R"({"type":"function_call","id":"fc_1","call_id":"call_r","name":"get_time","arguments":"{\"tz\":\"UTC\"}","status":"completed"})";
  const std::string resp =
      R"({"id":"resp_1","object":"response","status":"completed","model":"gpt-x","output":[)" + item + "]}";
  expect_tools(LlmEndpoint::OpenAIResponses, sized_response("application/json", resp),
               {{"call_r", "get_time", R"({"tz":"UTC"})", false}});
  const std::vector<std::string> events = {
      "event: response.function_call_arguments.delta\ndata: "
      R"({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"tz\""})"
      "\n\n",
      "event: response.output_item.done\ndata: "
      R"({"type":"response.output_item.done","output_index":0,"item":)" +
          item + "}\n\n",
  };
  expect_tools(LlmEndpoint::OpenAIResponses, chunked_response("text/event-stream", events),
               {{"call_r", "get_time", R"({"tz":"UTC"})", false}});
}

TEST(LlmToolCalls, LongArgumentsAreCutAndFlaggedErrorsGiveNone) {
  const std::string big(kMaxToolArguments + 100, 'a');
  const std::string body = R"({"id":"c3","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{)"
                           R"("tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":")" +
                           big + R"("}}]}}]})";
  const auto calls = tools_in_pieces(LlmEndpoint::OpenAIChat, sized_response("application/json", body), 4096);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].truncated);
  EXPECT_EQ(calls[0].arguments.size(), kMaxToolArguments);
  // A name streamed in endless pieces stays bounded.
  std::vector<std::string> events;
  for (int i = 0; i < 100; ++i)
    events.push_back(
        "data: "
        R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"nnnnnnnnnn"}}]}}]})"
        "\n\n");
  events.push_back("data: [DONE]\n\n");
  const auto named = tools_in_pieces(LlmEndpoint::OpenAIChat, chunked_response("text/event-stream", events), 64);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].name.size(), kMaxToolLabel);
  // An error status is not read: no calls.
  EXPECT_TRUE(tools_in_pieces(LlmEndpoint::OpenAIChat, sized_response("application/json", body, 500), 4096).empty());
}

}  // namespace llm_usage_test
}  // namespace faultline
