// --replay's and --cache's pieces: the key's normalisation, what counts as a
// whole answer, the recording file's round trip, the folder and memory stores.
#include "userspace/guard/llm_replay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "base/files.h"

namespace faultline {
namespace {

TEST(LlmReplay, KeyIgnoresKeyOrderAndSpacesButNotValuesMethodOrPath) {
  const std::string k = llm_replay_key("POST", "/v1/messages", R"({"model":"m","max_tokens":5})");
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(k, llm_replay_key("POST", "/v1/messages", R"( { "max_tokens" : 5, "model" : "m" } )"));
  EXPECT_NE(k, llm_replay_key("POST", "/v1/messages", R"({"model":"m","max_tokens":6})"));
  EXPECT_NE(k, llm_replay_key("POST", "/v1/messages?beta=1", R"({"model":"m","max_tokens":5})"));
  EXPECT_NE(k, llm_replay_key("PUT", "/v1/messages", R"({"model":"m","max_tokens":5})"));
  // A body that is not JSON is keyed as it is.
  EXPECT_EQ(llm_replay_key("POST", "/x", "not json"), llm_replay_key("POST", "/x", "not json"));
  EXPECT_NE(llm_replay_key("POST", "/x", "not json"), llm_replay_key("POST", "/x", "not  json"));
}

TEST(LlmReplay, WholeAnswersAreTold) {
  EXPECT_TRUE(replay_answer_complete("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"));
  EXPECT_FALSE(replay_answer_complete("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nhi"));
  EXPECT_FALSE(replay_answer_complete("HTTP/1.1 500 Oops\r\nContent-Length: 2\r\n\r\nhi"));
  EXPECT_FALSE(replay_answer_complete("HTTP/1.1 200 OK\r\nContent-Le"));
  EXPECT_TRUE(replay_answer_complete("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"));
  EXPECT_FALSE(replay_answer_complete("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n"));
  EXPECT_TRUE(replay_answer_complete("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close"));
}

TEST(LlmReplay, RecordingRoundTripsBytesExactlyWithTextOrHex) {
  ReplayRecording r;
  r.key = "k";
  r.method = "POST";
  r.target = "/v1/messages";
  r.chunks = {{0, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"},
              {12, std::string("\xe2\x82", 2)},
              {30, std::string("\xac!", 2)}};  // a euro sign split across two pieces
  const std::string text = replay_recording_json(r);
  EXPECT_NE(text.find("\"hex\""), std::string::npos) << text;
  auto back = parse_replay_recording(text);
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->bytes(), r.bytes());
  ASSERT_EQ(back->chunks.size(), 3u);
  EXPECT_EQ(back->chunks[2].at_ms, 30u);
  EXPECT_FALSE(parse_replay_recording(R"({"chunks":[{"at_ms":0,"text":"HTTP/1.1 500 x\r\n\r\n"}]})"));
  EXPECT_FALSE(parse_replay_recording("[]"));
}

TEST(LlmReplay, FolderStoreWritesAFileAFreshStoreReads) {
  auto dir = TempFolder::create("fl-replay-test");
  ASSERT_TRUE(dir);
  ReplayRecording r;
  r.key = llm_replay_key("POST", "/v1/messages", "{}");
  r.chunks = {{0, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
  ReplayStore store(dir->path());
  ASSERT_TRUE(store.save(r));
  EXPECT_TRUE(std::filesystem::exists(dir->path() + "/" + r.key + ".json"));
  ReplayStore fresh(dir->path());
  auto found = fresh.find(r.key);
  ASSERT_TRUE(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->bytes(), r.bytes());
  auto none = fresh.find(std::string(64, 'a'));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(write_file_atomic(dir->path() + "/" + std::string(64, 'b') + ".json", "garbage"));
  EXPECT_FALSE(fresh.find(std::string(64, 'b')));  // named as an error, not taken as a miss
}

TEST(LlmReplay, MemoryStoreForgetsAfterItsTtl) {
  ReplayStore cache(std::chrono::milliseconds(100));
  ReplayRecording r;
  r.key = "k";
  r.chunks = {{0, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
  ASSERT_TRUE(cache.save(r));
  auto hit = cache.find("k");
  ASSERT_TRUE(hit);
  EXPECT_TRUE(hit->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto gone = cache.find("k");
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->has_value());
}

TEST(LlmReplay, PromptsAreNormalisedAndComparedByTrigramCosine) {
  EXPECT_EQ(normalise_prompt("  Hello,   WORLD!\n\tNäive  "), "hello world näive");
  EXPECT_EQ(normalise_prompt("?!"), "");
  const auto a = prompt_profile(normalise_prompt("Summarise the release notes in three points."));
  EXPECT_NEAR(prompt_similarity(a, prompt_profile(normalise_prompt("summarise THE release notes, in three points"))),
              1.0, 1e-9);
  const double close =
      prompt_similarity(a, prompt_profile(normalise_prompt("Please summarise the release notes in three points")));
  EXPECT_GT(close, 0.9);
  EXPECT_LT(close, 1.0);
  EXPECT_LT(prompt_similarity(a, prompt_profile(normalise_prompt("Write a haiku about the sea"))), 0.3);
  EXPECT_EQ(prompt_similarity(a, prompt_profile("")), 0.0);
}

TEST(LlmReplay, OnlyThePromptMayDifferForASimilarHit) {
  const auto in = [](const char* body) { return llm_similarity_input("POST", "/v1/messages", body); };
  const auto a = in(
      R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":"tell me a short story about a red fox who lives in the forest near the river"}]})");
  const auto b = in(
      R"({"max_tokens":10,"model":"m","system":"be brief","messages":[{"role":"user","content":"Tell me a short story about a red fox who lives in the forest near the river!"}]})");
  const auto c = in(
      R"({"model":"m","max_tokens":11,"messages":[{"role":"user","content":"tell me a short story about a red fox who lives in the forest near the river"}]})");
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->scope, b->scope);  // the system prompt is prompt, not scope
  EXPECT_NE(a->scope, c->scope);  // max_tokens is not
  EXPECT_FALSE(in("not json"));
  EXPECT_FALSE(in(R"({"model":"m","messages":[]})")) << "no prompt text";

  ReplayStore store(std::chrono::milliseconds(60'000));
  ReplayRecording r;
  r.key = "k1";
  r.chunks = {{0, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"}};
  r.similar = a;
  ASSERT_TRUE(store.save(r).ok());
  EXPECT_FALSE(store.find_similar(*b)) << "similar mode is off";
  store.set_similar(0.92);
  auto hit = store.find_similar(*in(
      R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Tell me a short story about a red fox who lives in the forest near the river, please"}]})"));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->recording.key, "k1");
  EXPECT_GE(hit->score, 0.92);
  EXPECT_FALSE(store.find_similar(*c)) << "another max_tokens";
  EXPECT_FALSE(store.find_similar(*in(
      R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":"list the planets of the solar system"}]})")));
}

}  // namespace
}  // namespace faultline
