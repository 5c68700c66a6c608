// The activity chain: what the writer appends verifies, resumes across
// writers, and every kind of tampering is found at the right first entry.
#include "userspace/guard/activity_log.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "base/files.h"

namespace faultline {
namespace {

class ActivityLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fl-activity-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/activity.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // alice 3 entries, bob 2, interleaved: lines alice1 bob1 alice2 bob2 alice3.
  void write_sample() {
    auto w = ActivityWriter::open(path_);
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (const char* who : {"alice", "bob", "alice", "bob", "alice"}) {
      ActivityEntry e;
      e.identity = who;
      e.kind = "request";
      e.method = "POST";
      e.host = "api.anthropic.com";
      e.path = "/v1/messages?api_key=sk-123&x=1";
      e.verdict = "allow";
      e.llm = ActivityLlm{"claude-sonnet-4", 10, 20, 3, 4};
      auto r = w->append(e);
      ASSERT_TRUE(r.ok()) << r.error().message;
    }
  }

  std::vector<std::string> lines() const {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void rewrite(const std::vector<std::string>& ls) const {
    std::ofstream out(path_, std::ios::trunc);
    for (const auto& l : ls) out << l << "\n";
  }
  ActivityVerdict verify() const {
    auto v = verify_activity(path_);
    EXPECT_TRUE(v.ok()) << v.error().message;
    return v.ok() ? *v : ActivityVerdict{};
  }

  std::string dir_, path_;
};

TEST_F(ActivityLogTest, WrittenChainVerifies) {
  write_sample();
  const ActivityVerdict v = verify();
  EXPECT_TRUE(v.intact()) << v.first_bad->describe();
  EXPECT_EQ(v.entries, 5u);
  EXPECT_EQ(v.identities, 2u);

  const auto ls = lines();
  ASSERT_EQ(ls.size(), 5u);
  const auto first = nlohmann::ordered_json::parse(ls[0]);
  std::vector<std::string> keys;
  for (const auto& [k, value] : first.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"seq", "ts", "identity", "kind", "method", "host", "path", "verdict",
                                            "rule", "llm", "prev", "hash"}));
  EXPECT_EQ(first["seq"], 1);
  EXPECT_EQ(first["prev"], "");
  EXPECT_EQ(first["hash"].get<std::string>().size(), 64u);
  EXPECT_EQ(first["path"], "/v1/messages?api_key=[REDACTED]&x=1") << "the path is redacted before hashing";
  EXPECT_EQ(first["llm"]["reasoning"], 4);
  const auto alice2 = nlohmann::json::parse(ls[2]);
  EXPECT_EQ(alice2["seq"], 2);
  EXPECT_EQ(alice2["prev"].get<std::string>(), first["hash"].get<std::string>())
      << "prev is the same identity's previous hash";
  const auto bob1 = nlohmann::json::parse(ls[1]);
  EXPECT_EQ(bob1["seq"], 1);
  EXPECT_EQ(bob1["prev"], "");
}

TEST_F(ActivityLogTest, HashIsOverTheCanonicalLine) {
  ActivityEntry e;
  e.seq = 1;
  e.ts = "2025-06-01T12:00:00.000Z";
  e.identity = "alice";
  e.kind = "request";
  e.verdict = "deny";
  EXPECT_EQ(activity_canonical_line(e),
            R"({"seq":1,"ts":"2025-06-01T12:00:00.000Z","identity":"alice","kind":"request","method":"","host":"",)"
            R"("path":"","verdict":"deny","rule":"","llm":null,"prev":""})");
  e.hash = activity_hash(e);
  ActivityChain chain;
  EXPECT_TRUE(std::holds_alternative<ActivityEntry>(chain.check_line(activity_line(e))));
}

TEST_F(ActivityLogTest, WriterResumesEachChain) {
  write_sample();
  {
    auto w = ActivityWriter::open(path_, ActivityWriter::Options{1, Redactor{}});
    ASSERT_TRUE(w.ok()) << w.error().message;
    ActivityEntry e;
    e.identity = "bob";
    e.kind = "llm";
    auto r = w->append(e);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->seq, 3u);
  }
  const ActivityVerdict v = verify();
  EXPECT_TRUE(v.intact()) << v.first_bad->describe();
  EXPECT_EQ(v.entries, 6u);
}

TEST_F(ActivityLogTest, EditedFieldIsAHashMismatch) {
  write_sample();
  auto ls = lines();
  auto j = nlohmann::ordered_json::parse(ls[2]);
  j["verdict"] = "deny";
  ls[2] = j.dump();
  rewrite(ls);
  const ActivityVerdict v = verify();
  ASSERT_FALSE(v.intact());
  EXPECT_EQ(v.first_bad->line, 3u);
  EXPECT_EQ(v.first_bad->identity, "alice");
  EXPECT_EQ(v.first_bad->seq, 2u);
  EXPECT_NE(v.first_bad->problem.find("hash mismatch"), std::string::npos) << v.first_bad->problem;
  EXPECT_EQ(v.entries, 2u) << "the entries before it";
}

// Two lines as a guard wrote them before the reason field existed (hashed
// outside this code, by Python's hashlib over the canonical line).
const char* const kOldLines[] = {
    R"({"seq":1,"ts":"2025-06-01T12:00:01.000Z","identity":"alice","kind":"request","method":"POST",)"
    R"("host":"api.example.com","path":"/v1/items","verdict":"allow","rule":"","llm":null,"prev":"",)"
    R"("hash":"70c6d2206b5f821ab3d1c3bbcf47fd3d12199df8450982f91f232ffe15bfc098"})",
    R"({"seq":2,"ts":"2025-06-01T12:00:02.000Z","identity":"alice","kind":"request","method":"POST",)"
    R"("host":"api.example.com","path":"/admin/users","verdict":"deny","rule":"no-admin","llm":null,)"
    R"("prev":"70c6d2206b5f821ab3d1c3bbcf47fd3d12199df8450982f91f232ffe15bfc098",)"
    R"("hash":"d58c6ba494837f98bf92e8a98d9940d5d39e01c94990095a364092172398275f"})",
};

TEST_F(ActivityLogTest, OldLinesWithoutAReasonVerifyAndTheChainGoesOnWithOne) {
  rewrite({kOldLines[0], kOldLines[1]});
  ActivityVerdict v = verify();
  EXPECT_TRUE(v.intact()) << v.first_bad->describe();
  EXPECT_EQ(v.entries, 2u);
  {
    auto w = ActivityWriter::open(path_);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ActivityEntry e{.identity = "alice", .kind = "request", .method = "POST", .host = "api.example.com"};
    e.path = "/admin/keys";
    e.verdict = "deny";
    e.rule = "wasm:deny_admin.wasm";
    e.reason = "POST to an /admin path";
    auto r = w->append(e);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->seq, 3u);
    EXPECT_EQ(r->prev, "d58c6ba494837f98bf92e8a98d9940d5d39e01c94990095a364092172398275f");
    auto plain = w->append(ActivityEntry{.identity = "alice", .kind = "request", .verdict = "allow"});
    ASSERT_TRUE(plain.ok()) << plain.error().message;
  }
  v = verify();
  EXPECT_TRUE(v.intact()) << v.first_bad->describe();
  EXPECT_EQ(v.entries, 4u);
  const auto ls = lines();
  ASSERT_EQ(ls.size(), 4u);
  EXPECT_EQ(ls[0], kOldLines[0]) << "an old line is left as it was";
  std::vector<std::string> keys;
  const auto third = nlohmann::ordered_json::parse(ls[2]);  // a local: items() of a temporary would dangle
  for (const auto& [k, value] : third.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"seq", "ts", "identity", "kind", "method", "host", "path", "verdict",
                                            "rule", "reason", "llm", "prev", "hash"}));
  EXPECT_EQ(nlohmann::json::parse(ls[2])["reason"], "POST to an /admin path");
  EXPECT_FALSE(nlohmann::json::parse(ls[3]).contains("reason")) << "an empty reason is not written: " << ls[3];
}

TEST_F(ActivityLogTest, AReasonIsHashedAndRedacted) {
  ActivityEntry e{.seq = 1, .ts = "2025-06-01T12:00:00.000Z", .identity = "alice", .kind = "request"};
  e.verdict = "deny";
  e.rule = "wasm:p.wasm";
  e.reason = "no";
  EXPECT_EQ(activity_canonical_line(e),
            R"({"seq":1,"ts":"2025-06-01T12:00:00.000Z","identity":"alice","kind":"request","method":"","host":"",)"
            R"("path":"","verdict":"deny","rule":"wasm:p.wasm","reason":"no","llm":null,"prev":""})");
  const std::string without = activity_hash(
      ActivityEntry{e.seq, e.ts, e.identity, e.kind, "", "", "", e.verdict, e.rule, "", std::nullopt, "", ""});
  EXPECT_NE(activity_hash(e), without) << "the reason is part of what is hashed";

  auto w = ActivityWriter::open(path_);
  ASSERT_TRUE(w.ok()) << w.error().message;
  e = ActivityEntry{.identity = "bob", .kind = "request", .verdict = "deny", .rule = "wasm:p.wasm"};
  e.reason = "saw /upload?api_key=sk-123&x=1";
  auto r = w->append(e);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->reason, "saw /upload?api_key=[REDACTED]&x=1") << "redacted like the path, before it is hashed";
  ASSERT_TRUE(w->flush().ok());
  EXPECT_EQ(lines().at(0).find("sk-123"), std::string::npos) << lines().at(0);
  const ActivityVerdict v = verify();
  EXPECT_TRUE(v.intact()) << v.first_bad->describe();
}

TEST_F(ActivityLogTest, AReasonEditedAddedDroppedOrEmptiedBreaksTheChain) {
  {
    auto w = ActivityWriter::open(path_);
    ASSERT_TRUE(w.ok()) << w.error().message;
    for (int i = 0; i < 3; ++i) {
      ActivityEntry e{.identity = "alice", .kind = "request", .verdict = i == 1 ? "deny" : "allow"};
      if (i == 1) {
        e.rule = "wasm:deny_admin.wasm";
        e.reason = "POST to an /admin path";
      }
      ASSERT_TRUE(w->append(e).ok());
    }
  }
  const auto good = lines();
  ASSERT_EQ(good.size(), 3u);
  struct Case {
    const char* what;
    size_t line;
    std::function<void(nlohmann::ordered_json&)> edit;
    const char* problem;
  };
  const std::vector<Case> cases = {
      {"edited", 1, [](auto& j) { j["reason"] = "allowed by the plugin"; }, "hash mismatch"},
      {"dropped", 1, [](auto& j) { j.erase("reason"); }, "hash mismatch"},
      {"added to a line without one", 0, [](auto& j) { j["reason"] = "harmless"; }, "hash mismatch"},
      {"emptied", 1, [](auto& j) { j["reason"] = ""; }, "reason is empty"},
      {"not text", 1, [](auto& j) { j["reason"] = 7; }, "reason is not text"},
  };
  for (const auto& c : cases) {
    auto ls = good;
    auto j = nlohmann::ordered_json::parse(ls[c.line]);
    c.edit(j);
    ls[c.line] = j.dump();
    rewrite(ls);
    const ActivityVerdict v = verify();
    ASSERT_FALSE(v.intact()) << c.what;
    EXPECT_EQ(v.first_bad->line, c.line + 1) << c.what;
    EXPECT_NE(v.first_bad->problem.find(c.problem), std::string::npos) << c.what << ": " << v.first_bad->problem;
  }
}

TEST_F(ActivityLogTest, RehashedEditIsAPrevMismatch) {
  write_sample();
  auto ls = lines();
  auto j = nlohmann::json::parse(ls[0]);
  ActivityChain scratch;
  auto e = std::get<ActivityEntry>(scratch.check_line(ls[0]));
  e.verdict = "deny";
  e.hash = activity_hash(e);  // a forger who recomputes the hash
  ls[0] = activity_line(e);
  rewrite(ls);
  const ActivityVerdict v = verify();
  ASSERT_FALSE(v.intact());
  EXPECT_EQ(v.first_bad->line, 3u) << v.first_bad->describe();
  EXPECT_EQ(v.first_bad->identity, "alice");
  EXPECT_NE(v.first_bad->problem.find("prev does not match"), std::string::npos) << v.first_bad->problem;
}

TEST_F(ActivityLogTest, DeletedLineIsASeqGap) {
  write_sample();
  auto ls = lines();
  ls.erase(ls.begin() + 1);  // bob's first
  rewrite(ls);
  const ActivityVerdict v = verify();
  ASSERT_FALSE(v.intact());
  EXPECT_EQ(v.first_bad->line, 3u) << v.first_bad->describe();  // bob's second, now line 3
  EXPECT_EQ(v.first_bad->identity, "bob");
  EXPECT_EQ(v.first_bad->seq, 2u);
  EXPECT_NE(v.first_bad->problem.find("seq 2 where 1 was expected"), std::string::npos) << v.first_bad->problem;
}

TEST_F(ActivityLogTest, ReorderedLinesOfOneIdentity) {
  write_sample();
  auto ls = lines();
  std::swap(ls[2], ls[4]);  // alice's second and third
  rewrite(ls);
  const ActivityVerdict v = verify();
  ASSERT_FALSE(v.intact());
  EXPECT_EQ(v.first_bad->line, 3u) << v.first_bad->describe();
  EXPECT_EQ(v.first_bad->identity, "alice");
  EXPECT_EQ(v.first_bad->seq, 3u);
  EXPECT_NE(v.first_bad->problem.find("seq 3 where 2 was expected"), std::string::npos) << v.first_bad->problem;
}

TEST_F(ActivityLogTest, BadJsonAndBadShape) {
  write_sample();
  auto ls = lines();
  ls[3] = ls[3].substr(0, ls[3].size() / 2);  // a torn line
  rewrite(ls);
  ActivityVerdict v = verify();
  ASSERT_FALSE(v.intact());
  EXPECT_EQ(v.first_bad->line, 4u);
  EXPECT_EQ(v.first_bad->problem, "not JSON");

  ls = lines();
  auto j = nlohmann::ordered_json::parse(lines()[0]);
  j["extra"] = 1;  // a field outside the hash would go unnoticed: refused
  ls[0] = j.dump();
  rewrite(ls);
  v = verify();
  ASSERT_FALSE(v.intact());
  EXPECT_EQ(v.first_bad->line, 1u);
  EXPECT_EQ(v.first_bad->identity, "alice");
  EXPECT_EQ(v.first_bad->problem, "unknown field 'extra'");
  EXPECT_EQ(v.first_bad->describe(), "line 1 (identity alice, seq 1): unknown field 'extra'");
}

TEST_F(ActivityLogTest, WriterRefusesABrokenChainAndATornTail) {
  write_sample();
  auto ls = lines();
  ls.erase(ls.begin());
  rewrite(ls);
  auto w = ActivityWriter::open(path_);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("never extended"), std::string::npos) << w.error().message;

  std::ofstream(path_, std::ios::trunc) << "{\"seq\":1";
  w = ActivityWriter::open(path_);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("torn"), std::string::npos) << w.error().message;
}

TEST_F(ActivityLogTest, MissingFileIsBadInput) {
  auto v = verify_activity(dir_ + "/none.jsonl");
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(v.error().bad_input);
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

// The writer moves its chain without reading a line back, so every shape of
// entry it may write must verify: empty and odd fields, invalid UTF-8 and
// control bytes (replaced in the line), no LLM part, the largest counts.
TEST(ActivityWriterShapes, EveryShapeOfEntryVerifies) {
  auto dir = TempFolder::create("fl-activity-shapes-");
  ASSERT_TRUE(dir) << dir.error().describe();
  const std::string path = dir->path() + "/shapes.jsonl";
  {
    auto w = ActivityWriter::open(path, ActivityWriter::Options{.sync_every = 2});
    ASSERT_TRUE(w.ok()) << w.error().message;
    std::vector<ActivityEntry> shapes(6);
    shapes[0] = ActivityEntry{.identity = "a", .kind = "request"};
    shapes[1] = ActivityEntry{.identity = "a",
                              .kind = "request",
                              .method = "GET",
                              .host = "h\xff\xfe.example",
                              .path = std::string("/x\x01\x7f\"\\/\xc3\x28", 10),
                              .verdict = "deny",
                              .rule = "dlp-block"};
    shapes[2] = ActivityEntry{.identity = "b\xe2\x82", .kind = "llm", .llm = ActivityLlm{"m\xc0", 0, 0, 0, 0}};
    shapes[3] = ActivityEntry{.identity = "a",
                              .kind = "llm",
                              .host = "api.anthropic.com",
                              .llm = ActivityLlm{"claude", UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX}};
    shapes[4] = ActivityEntry{.identity = "\xf0\x9f\x98\x80 emoji", .kind = "mcp", .path = "write_file"};
    shapes[5] = ActivityEntry{.ts = "2025-06-01T12:00:00.123Z", .identity = "a", .kind = "request", .verdict = "allow"};
    for (const auto& e : shapes) {
      auto r = w->append(e);
      ASSERT_TRUE(r.ok()) << r.error().message;
    }
  }
  auto v = verify_activity(path);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->intact()) << v->first_bad->describe();
  EXPECT_EQ(v->entries, 6u);
  // And a writer reopened on the file continues each chain.
  {
    auto w = ActivityWriter::open(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE(w->append(ActivityEntry{.identity = "b\xe2\x82", .kind = "request"}).ok());
  }
  v = verify_activity(path);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->intact()) << v->first_bad->describe();
  EXPECT_EQ(v->entries, 7u);
}

}  // namespace
}  // namespace faultline

namespace faultline {
namespace {

// The proxy's threads only post: the writer's own thread chains and writes,
// in the order of the posts, and whatever is still queued when the writer is
// destroyed is written (nothing lost at exit).
TEST(ActivityWriterQueue, PostsFromManyThreadsAreWrittenInOrderAndDrainedAtClose) {
  auto dir = TempFolder::create("fl-activity-queue-");
  ASSERT_TRUE(dir) << dir.error().describe();
  const std::string path = dir->path() + "/queue.jsonl";
  constexpr int kThreads = 6, kPerThread = 400;
  std::mutex seen_mu;
  std::vector<std::thread::id> writer_threads;
  std::map<std::string, uint64_t> last_seq_seen;
  bool seq_out_of_order = false;
  {
    ActivityWriter::Options o;
    o.sync_every = 16;
    o.on_append = [&](const ActivityEntry& e, const std::string&) {
      std::lock_guard hold(seen_mu);
      if (writer_threads.empty() || writer_threads.back() != std::this_thread::get_id())
        writer_threads.push_back(std::this_thread::get_id());
      if (e.seq != last_seq_seen[e.identity] + 1) seq_out_of_order = true;
      last_seq_seen[e.identity] = e.seq;
    };
    auto w = ActivityWriter::open(path, std::move(o));
    ASSERT_TRUE(w.ok()) << w.error().message;
    std::vector<std::thread> posters;
    for (int t = 0; t < kThreads; ++t)
      posters.emplace_back([&w, t] {
        for (int i = 0; i < kPerThread; ++i)
          w->post(ActivityEntry{.identity = t % 2 == 0 ? "even" : "odd",
                                .kind = "request",
                                .method = "GET",
                                .host = "127.0.0.1:8080",
                                .path = "/t" + std::to_string(t) + "/" + std::to_string(i),
                                .verdict = "allow"});
      });
    for (auto& p : posters) p.join();
    // No flush: the writer's destruction writes what is still queued.
  }
  auto v = verify_activity(path);
  ASSERT_TRUE(v.ok()) << v.error().message;
  EXPECT_TRUE(v->intact()) << v->first_bad->describe();
  EXPECT_EQ(v->entries, static_cast<size_t>(kThreads * kPerThread)) << "every posted entry is in the file";
  EXPECT_EQ(v->identities, 2u);
  EXPECT_FALSE(seq_out_of_order) << "on_append saw each identity's entries in seq order";
  ASSERT_EQ(writer_threads.size(), 1u) << "one thread, the writer's, wrote every line";
  EXPECT_NE(writer_threads.front(), std::this_thread::get_id());
  // Each poster's entries are in the file in the order it posted them.
  std::ifstream in(path);
  std::map<int, int> next;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    const std::string p = j["path"];
    const int t = std::stoi(p.substr(2));
    const int i = std::stoi(p.substr(p.rfind('/') + 1));
    EXPECT_EQ(i, next[t]) << "poster " << t << "'s entries out of order";
    next[t] = i + 1;
  }
  EXPECT_EQ(next.size(), static_cast<size_t>(kThreads));
}

TEST(ActivityWriterQueue, APostedEntryThatCannotBeWrittenIsReportedNotLostSilently) {
  auto dir = TempFolder::create("fl-activity-queue-err-");
  ASSERT_TRUE(dir) << dir.error().describe();
  const std::string path = dir->path() + "/err.jsonl";
  std::vector<std::string> errors;
  std::mutex mu;
  ActivityWriter::Options o;
  o.on_error = [&](const Error& e) {
    std::lock_guard hold(mu);
    errors.push_back(e.describe());
  };
  auto w = ActivityWriter::open(path, std::move(o));
  ASSERT_TRUE(w.ok()) << w.error().message;
  w->post(ActivityEntry{.kind = "request"});  // no identity
  w->post(ActivityEntry{.identity = "a", .kind = "request"});
  auto st = w->flush();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().describe().find("without an identity"), std::string::npos) << st.error().describe();
  EXPECT_TRUE(w->flush().ok()) << "the error is returned once";
  {
    std::lock_guard hold(mu);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("without an identity"), std::string::npos) << errors[0];
  }
  auto v = verify_activity(path);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->entries, 1u) << "flush() returned only once the entry after it was written";
}

}  // namespace
}  // namespace faultline
