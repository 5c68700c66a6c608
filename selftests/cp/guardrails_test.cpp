// faultcp's side of the AI-agent guard on both backends: held requests and
// their decisions reaching a waiting long poll within a second, expiry and
// withdrawal, workspace isolation; activity batches deduplicated, their
// chains checked and flagged, blocks in the audit log, filters, paging,
// summary and usage; the guard section versioned and long-polled; the
// proctor's settings; bad input named; and a faultcp restart losing nothing.
#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <map>
#include <set>
#include <tuple>

#include "cp_client.h"
#include "selftests/lib/child_process.h"
#include "userspace/guard/activity_log.h"

// A named namespace: cp_tests compiles as one unity batch, and api_test.cpp's
// anonymous namespace has a Tenant of its own.
namespace guardrails_test {

using fltest::Backend;
using fltest::CpReply;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

std::string rfc3339_in(std::chrono::milliseconds from_now) {
  const auto t = std::chrono::system_clock::now() + from_now;
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const time_t s = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&s, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
  return buf;
}

// A chain of activity entries per identity, hashed as the guard hashes them.
class ChainBuilder {
 public:
  faultline::ActivityEntry next(const std::string& identity, const std::string& verdict = "allow",
                                const std::string& host = "api.example.com",
                                std::optional<faultline::ActivityLlm> llm = std::nullopt,
                                const std::string& reason = "") {
    auto& head = heads_[identity];
    faultline::ActivityEntry e;
    e.seq = ++head.first;
    e.ts = rfc3339_in(0ms);
    e.identity = identity;
    e.kind = llm ? "llm" : "request";
    e.method = "POST";
    e.host = host;
    e.path = "/v1/things";
    e.verdict = verdict;
    e.rule = verdict == "allow" ? "" : "rule-" + verdict;
    e.reason = reason;
    e.llm = std::move(llm);
    e.prev = head.second;
    e.hash = faultline::activity_hash(e);
    head.second = e.hash;
    return e;
  }

 private:
  std::map<std::string, std::pair<uint64_t, std::string>> heads_;
};

json entry_json(const faultline::ActivityEntry& e) { return json::parse(faultline::activity_line(e)); }
std::string batch(const std::vector<faultline::ActivityEntry>& entries) {
  json list = json::array();
  for (const auto& e : entries) list.push_back(entry_json(e));
  return json{{"entries", list}}.dump();
}

struct Tenant {
  std::string token;  // a person's session
  std::string guard;  // the guard's agent token
};

class GuardrailsTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { server_ = std::make_unique<fltest::CpServer>(GetParam(), fltest::test_config()); }

  CpReply call(const std::string& method, const std::string& path, const std::string& token = "",
               const std::string& body = "", int timeout_ms = 10'000) {
    return server_->call(method, path, token, body, timeout_ms);
  }

  Tenant tenant(const std::string& name) {
    Tenant t;
    auto r =
        call("POST", "/v1/auth/signup", "",
             json{{"email", name + "@example.com"}, {"password", "correct horse battery"}, {"workspace", name}}.dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    t.token = r.json().value("token", "");
    auto enr = call("POST", "/v1/tokens", t.token, R"({"kind":"enrollment"})").json().value("token", "");
    auto reg = call("POST", "/v1/agents/register", enr, R"({"hostname":")" + name + R"(-guard"})");
    EXPECT_EQ(reg.status, 201) << reg.describe();
    t.guard = reg.json().value("token", "");
    return t;
  }

  json held(const Tenant& t, const std::string& request_id, std::chrono::milliseconds expires_in = 120s) {
    auto r = call("POST", "/v1/guardrails/approvals", t.guard,
                  json{{"request_id", request_id},
                       {"identity", "alice@laptop"},
                       {"method", "POST"},
                       {"host", "api.prod.example.com"},
                       {"path", "/v1/deploy"},
                       {"rule", "prod-writes"},
                       {"reason", "writes to prod need a person"},
                       {"expires_at", rfc3339_in(expires_in)}}
                      .dump());
    EXPECT_EQ(r.status, 201) << r.describe();
    return r.json();
  }

  std::vector<json> audit(const Tenant& t, const std::string& action) {
    std::vector<json> out;
    // Kept in a local: a range-for over a temporary's member would dangle.
    const json exported = call("GET", "/v1/audit/export", t.token).json();
    for (const auto& e : exported["entries"])
      if (e["action"] == action) out.push_back(e);
    return out;
  }

  std::unique_ptr<fltest::CpServer> server_;
};

TEST_P(GuardrailsTest, ADecisionReachesTheGuardsWaitingPollWithinOneSecond) {
  Tenant t = tenant("acme");
  for (const bool approve : {true, false}) {
    const json a = held(t, approve ? "req-1" : "req-2");
    EXPECT_EQ(a["state"], "pending");
    EXPECT_TRUE(a["decision"].is_null());
    const std::string id = std::to_string(a["id"].get<int64_t>());
    auto poll = std::async(std::launch::async, [&] {
      auto r = call("GET", "/v1/guardrails/approvals/" + id + "/decision?wait=30s", t.guard, "", 35'000);
      return std::make_pair(r, Clock::now());
    });
    ASSERT_EQ(poll.wait_for(400ms), std::future_status::timeout) << "the poll did not wait for a decision";
    auto list = call("GET", "/v1/guardrails/approvals", t.token).json();
    ASSERT_EQ(list["approvals"][0]["id"], a["id"]) << "the pending one is not first: " << list;
    const auto decided = Clock::now();
    auto d = call("POST", "/v1/guardrails/approvals/" + id + (approve ? "/approve" : "/deny"), t.token,
                  R"({"reason":"checked the diff"})");
    ASSERT_EQ(d.status, 200) << d.describe();
    auto [reply, at] = poll.get();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(at - decided).count();
    EXPECT_LT(waited, 1000) << "the decision reached the poll after " << waited << " ms";
    ASSERT_EQ(reply.status, 200) << reply.describe();
    EXPECT_EQ(reply.json()["decision"], approve ? "approve" : "deny") << reply.body;
    EXPECT_EQ(reply.json()["state"], approve ? "approved" : "denied");
    EXPECT_EQ(reply.json()["decision_reason"], "checked the diff");
    auto entries = audit(t, approve ? "guardrail.approval.approve" : "guardrail.approval.deny");
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0]["actor"].get<std::string>().rfind("user:", 0), 0u) << "who decided: " << entries[0];
    EXPECT_EQ(entries[0]["object"], "approval:" + id);
    // Decided once: a second decision is a conflict.
    EXPECT_EQ(call("POST", "/v1/guardrails/approvals/" + id + "/approve", t.token).status, 409);
  }
  EXPECT_EQ(call("POST", "/v1/audit/verify", t.token).json()["ok"], true);
}

TEST_P(GuardrailsTest, ExpiredOrWithdrawnApprovalsCannotBeDecided) {
  Tenant t = tenant("acme");
  // A retry of the same request_id is the same approval.
  const json a = held(t, "req-retry");
  auto again = call(
      "POST", "/v1/guardrails/approvals", t.guard,
      json{{"request_id", "req-retry"}, {"identity", "alice@laptop"}, {"host", "h"}, {"expires_at", rfc3339_in(60s)}}
          .dump());
  EXPECT_EQ(again.status, 200) << again.describe();
  EXPECT_EQ(again.json()["id"], a["id"]);

  // Expiry: the waiting poll is answered when it comes, and no one can decide after.
  const json soon = held(t, "req-soon", 600ms);
  const std::string soon_id = std::to_string(soon["id"].get<int64_t>());
  const auto start = Clock::now();
  auto r = call("GET", "/v1/guardrails/approvals/" + soon_id + "/decision?wait=10s", t.guard, "", 15'000);
  EXPECT_LT(ms_since(start), 2000) << "the poll outlived the expiry";
  EXPECT_EQ(r.json()["state"], "expired") << r.describe();
  EXPECT_TRUE(r.json()["decision"].is_null());
  auto late = call("POST", "/v1/guardrails/approvals/" + soon_id + "/approve", t.token);
  EXPECT_EQ(late.status, 409) << late.describe();
  EXPECT_NE(late.body.find("expired"), std::string::npos) << late.body;

  // Withdrawal by the guard (its client went away): the poll learns it, no one decides after.
  const std::string id = std::to_string(a["id"].get<int64_t>());
  auto poll = std::async(std::launch::async, [&] {
    return call("GET", "/v1/guardrails/approvals/" + id + "/decision?wait=30s", t.guard, "", 35'000);
  });
  std::this_thread::sleep_for(200ms);
  auto w = call("DELETE", "/v1/guardrails/approvals/" + id, t.guard);
  EXPECT_EQ(w.status, 200) << w.describe();
  EXPECT_EQ(poll.get().json()["state"], "withdrawn");
  auto denied = call("POST", "/v1/guardrails/approvals/" + id + "/deny", t.token);
  EXPECT_EQ(denied.status, 409) << denied.describe();
  EXPECT_NE(denied.body.find("withdrawn"), std::string::npos) << denied.body;
  EXPECT_EQ(call("DELETE", "/v1/guardrails/approvals/" + id, t.guard).status, 409);
  EXPECT_EQ(audit(t, "guardrail.approval.withdraw").size(), 1u);
  // Guards do not decide; people do not post held requests for guards.
  const json other = held(t, "req-self");
  EXPECT_EQ(call("POST", "/v1/guardrails/approvals/" + std::to_string(other["id"].get<int64_t>()) + "/approve", t.guard)
                .status,
            403)
      << "a guard approved its own held request";
}

TEST_P(GuardrailsTest, AnotherWorkspaceCannotSeeOrDecideAnApproval) {
  Tenant a = tenant("acme"), b = tenant("globex");
  const json held_a = held(a, "req-a");
  const std::string id = std::to_string(held_a["id"].get<int64_t>());
  EXPECT_TRUE(call("GET", "/v1/guardrails/approvals", b.token).json()["approvals"].empty());
  for (const auto& [method, path, token] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"POST", "/v1/guardrails/approvals/" + id + "/approve", b.token},
           {"POST", "/v1/guardrails/approvals/" + id + "/deny", b.token},
           {"GET", "/v1/guardrails/approvals/" + id + "/decision", b.guard},
           {"DELETE", "/v1/guardrails/approvals/" + id, b.guard}}) {
    auto r = call(method, path, token);
    EXPECT_EQ(r.status, 404) << method << " " << path << ": " << r.describe();
  }
  EXPECT_EQ(call("GET", "/v1/guardrails/approvals/" + id + "/decision", a.guard).json()["state"], "pending")
      << "another workspace changed it";
  ChainBuilder chain;
  ASSERT_EQ(call("POST", "/v1/guardrails/activity", a.guard, batch({chain.next("alice")})).status, 200);
  EXPECT_TRUE(call("GET", "/v1/guardrails/activity", b.token).json()["entries"].empty());
  EXPECT_TRUE(call("GET", "/v1/guardrails/activity/summary", b.token).json()["identities"].empty());
}

TEST_P(GuardrailsTest, ActivityIsDeduplicatedChainCheckedAndBlocksAreAudited) {
  Tenant t = tenant("acme");
  ChainBuilder chain;
  std::vector<faultline::ActivityEntry> first = {
      chain.next("alice"), chain.next("alice", "deny", "evil.example.com"), chain.next("bob", "approve"),
      chain.next("alice", "allow", "api.anthropic.com", faultline::ActivityLlm{"claude-sonnet-4", 1200, 300, 800, 0}),
      chain.next("bob", "allow", "api.openai.com", faultline::ActivityLlm{"gpt-5", 50, 20, 0, 10})};
  auto r = call("POST", "/v1/guardrails/activity", t.guard, batch(first));
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json()["stored"], 5);
  EXPECT_EQ(r.json()["blocks"], 1);
  EXPECT_TRUE(r.json()["flagged"].empty()) << r.body;
  EXPECT_EQ(r.json()["stored_through"]["alice"], 3);
  auto retry = call("POST", "/v1/guardrails/activity", t.guard, batch(first));
  EXPECT_EQ(retry.json()["stored"], 0) << retry.body;
  EXPECT_EQ(retry.json()["duplicates"], 5);
  auto blocks = audit(t, "guardrail.block");
  ASSERT_EQ(blocks.size(), 1u) << "a retried batch mirrored its block twice";
  EXPECT_EQ(blocks[0]["object"], "identity:alice");
  EXPECT_NE(blocks[0]["detail"].get<std::string>().find("evil.example.com"), std::string::npos);

  // Out of order: seq 5 before seq 4 is a gap until seq 4 arrives.
  auto a4 = chain.next("alice"), a5 = chain.next("alice");
  auto gap = call("POST", "/v1/guardrails/activity", t.guard, batch({a5}));
  ASSERT_EQ(gap.json()["flagged"].size(), 1u) << gap.body;
  EXPECT_EQ(gap.json()["flagged"][0]["chain"], "gap");
  auto fill = call("POST", "/v1/guardrails/activity", t.guard, batch({a4}));
  EXPECT_TRUE(fill.json()["flagged"].empty()) << fill.body;
  // Newest first by arrival: seq 4 (arrived last), then seq 5.
  auto listed = call("GET", "/v1/guardrails/activity?identity=alice&limit=2", t.token).json();
  ASSERT_EQ(listed["entries"].size(), 2u) << listed;
  EXPECT_EQ(listed["entries"][1]["seq"], 5);
  EXPECT_EQ(listed["entries"][1]["chain"], "ok") << "the gap did not close: " << listed;

  // Tampering is stored but flagged: an edited entry, a replaced one, a conflicting copy.
  auto a6 = chain.next("alice");
  a6.host = "edited.example.com";  // hash left as it was
  auto a7 = chain.next("alice");
  auto b3 = chain.next("bob");
  b3.prev = std::string(64, 'a');
  b3.hash = faultline::activity_hash(b3);  // rehashed, but no longer chained
  auto conflict = first[0];
  conflict.path = "/other";
  conflict.hash = faultline::activity_hash(conflict);
  auto bad = call("POST", "/v1/guardrails/activity", t.guard, batch({a6, a7, b3, conflict}));
  ASSERT_EQ(bad.status, 200) << bad.describe();
  std::map<std::string, std::string> by;
  const json bad_json = bad.json();
  for (const auto& f : bad_json["flagged"])
    by[f["identity"].get<std::string>() + "#" + std::to_string(f["seq"].get<int>())] = f["chain"];
  EXPECT_EQ(by["alice#6"], "bad-hash") << bad.body;
  EXPECT_EQ(by["bob#3"], "bad-prev") << bad.body;
  EXPECT_EQ(by.count("alice#7"), 0u) << "a7 chains to a6's hash as written: " << bad.body;
  ASSERT_EQ(bad.json()["conflicts"].size(), 1u) << bad.body;
  EXPECT_EQ(bad.json()["conflicts"][0]["seq"], 1);
  EXPECT_EQ(audit(t, "guardrail.activity.flagged").size(), 2u);  // the gap, then this batch

  // Filters and paging.
  auto denies = call("GET", "/v1/guardrails/activity?verdict=deny", t.token).json()["entries"];
  ASSERT_EQ(denies.size(), 1u);
  EXPECT_EQ(denies[0]["host"], "evil.example.com");
  EXPECT_EQ(call("GET", "/v1/guardrails/activity?host=api.openai.com", t.token).json()["entries"].size(), 1u);
  EXPECT_EQ(call("GET", "/v1/guardrails/activity?until=1000", t.token).json()["entries"].size(), 0u);
  EXPECT_EQ(call("GET", "/v1/guardrails/activity?since=2020-01-01T00:00:00Z", t.token).json()["entries"].size(), 10u);
  std::set<int64_t> seen;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    auto p =
        call("GET", "/v1/guardrails/activity?limit=3" + (cursor.empty() ? "" : "&cursor=" + cursor), t.token).json();
    for (const auto& e : p["entries"]) EXPECT_TRUE(seen.insert(e["id"].get<int64_t>()).second) << "seen twice";
    if (p["next_cursor"].is_null()) break;
    cursor = p["next_cursor"];
  }
  EXPECT_EQ(seen.size(), 10u) << "paging lost or repeated entries";

  // Summary and usage.
  const json x = held(t, "req-x");
  ASSERT_EQ(
      call("POST", "/v1/guardrails/approvals/" + std::to_string(x["id"].get<int64_t>()) + "/approve", t.token).status,
      200);
  auto summary = call("GET", "/v1/guardrails/activity/summary", t.token).json()["identities"];
  ASSERT_EQ(summary.size(), 3u) << summary;  // alice, alice@laptop (the approval), bob
  const json& alice = summary[0];
  EXPECT_EQ(alice["identity"], "alice");
  EXPECT_EQ(alice["requests"], 6);
  EXPECT_EQ(summary[1]["approved"], 1);
  EXPECT_EQ(alice["denied"], 1);
  EXPECT_EQ(alice["llm_calls"], 1);
  EXPECT_EQ(alice["tokens"]["in"], 1200);
  EXPECT_EQ(alice["tokens"]["cache"], 800);
  EXPECT_EQ(alice["flagged"], 1);
  EXPECT_EQ(summary[2]["held"], 1);
  auto usage = call("GET", "/v1/guardrails/usage?window=30d", t.token);
  ASSERT_EQ(usage.status, 200) << usage.describe();
  ASSERT_EQ(usage.json()["usage"].size(), 2u) << usage.body;
  EXPECT_EQ(usage.json()["usage"][1]["model"], "gpt-5");
  EXPECT_EQ(usage.json()["usage"][1]["output_tokens"], 20);
  EXPECT_EQ(usage.json()["usage"][1]["calls"], 1);
  EXPECT_EQ(call("POST", "/v1/audit/verify", t.token).json()["ok"], true);
}

TEST_P(GuardrailsTest, TheLogsOwnLinesArePostedAsNdjson) {
  Tenant t = tenant("acme");
  ChainBuilder chain;
  const std::string body =
      faultline::activity_line(chain.next("carol")) + "\n" + faultline::activity_line(chain.next("carol")) + "\n";
  auto r = fltest::cp_request(server_->port(), "POST", "/v1/guardrails/activity", t.guard, body, 10'000,
                              {{"Content-Type", "application/x-ndjson"}});
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json()["stored"], 2);
}

// An entry's reason (a WebAssembly plugin's): stored, listed, in the block's
// audit entry, and hashed: entries of before it (none) and after it chain on,
// and an edited reason is flagged.
TEST_P(GuardrailsTest, AnEntrysReasonIsStoredListedAndHashed) {
  Tenant t = tenant("acme");
  ChainBuilder chain;
  const std::string why = "POST to an /admin path";
  auto a1 = chain.next("alice");
  auto a2 = chain.next("alice", "deny", "api.example.com", std::nullopt, why);
  auto a3 = chain.next("alice");
  EXPECT_FALSE(entry_json(a1).contains("reason")) << "a line without a reason is as it always was";
  auto r = call("POST", "/v1/guardrails/activity", t.guard, batch({a1, a2, a3}));
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json()["stored"], 3);
  EXPECT_TRUE(r.json()["flagged"].empty()) << r.body;
  const json listed = call("GET", "/v1/guardrails/activity?identity=alice", t.token).json();
  ASSERT_EQ(listed["entries"].size(), 3u) << listed;
  EXPECT_EQ(listed["entries"][1]["seq"], 2);
  EXPECT_EQ(listed["entries"][1]["reason"], why) << listed;
  EXPECT_EQ(listed["entries"][0]["reason"], "") << listed;
  EXPECT_EQ(listed["entries"][2]["reason"], "") << listed;
  auto blocks = audit(t, "guardrail.block");
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_NE(blocks[0]["detail"].get<std::string>().find(why), std::string::npos) << blocks[0];

  // The reason edited after the guard hashed it: stored, flagged.
  auto a4 = chain.next("alice", "deny", "api.example.com", std::nullopt, why);
  a4.reason = "allowed after all";
  auto a5 = chain.next("alice");
  auto bad = call("POST", "/v1/guardrails/activity", t.guard, batch({a4, a5}));
  ASSERT_EQ(bad.status, 200) << bad.describe();
  ASSERT_EQ(bad.json()["flagged"].size(), 1u) << bad.body;
  EXPECT_EQ(bad.json()["flagged"][0]["seq"], 4);
  EXPECT_EQ(bad.json()["flagged"][0]["chain"], "bad-hash");

  // An empty reason is not what a guard writes: refused, nothing stored.
  json empty = entry_json(chain.next("bob"));
  empty["reason"] = "";
  auto refused = call("POST", "/v1/guardrails/activity", t.guard, json{{"entries", {empty}}}.dump());
  EXPECT_EQ(refused.status, 400) << refused.describe();
  EXPECT_EQ(refused.json().value("field", ""), "entries[0].reason") << refused.body;
  EXPECT_TRUE(call("GET", "/v1/guardrails/activity?identity=bob", t.token).json()["entries"].empty());
}

TEST_P(GuardrailsTest, BadInputIsRefusedNamingWhatIsWrong) {
  Tenant t = tenant("acme");
  ChainBuilder chain;
  json good = entry_json(chain.next("alice"));
  auto with = [&](const std::string& key, const json& value) {
    json e = good;
    if (value.is_discarded())
      e.erase(key);
    else
      e[key] = value;
    return json{{"entries", {e}}}.dump();
  };
  json many = json::array();
  for (int i = 0; i < 201; ++i) many.push_back(good);
  struct Row {
    std::string method, path, body, field;
  };
  const json gone = json::value_t::discarded;
  const std::string soon = rfc3339_in(60s);
  const std::vector<Row> rows = {
      {"POST", "/v1/guardrails/activity", "{not json", "body"},
      {"POST", "/v1/guardrails/activity", "{}", "entries"},
      {"POST", "/v1/guardrails/activity", R"({"entries":[],"extra":1})", "extra"},
      {"POST", "/v1/guardrails/activity", R"({"entries":[]})", "entries"},
      {"POST", "/v1/guardrails/activity", json{{"entries", many}}.dump(), "entries"},
      {"POST", "/v1/guardrails/activity", with("seq", gone), "entries[0].seq"},
      {"POST", "/v1/guardrails/activity", with("seq", 0), "entries[0].seq"},
      {"POST", "/v1/guardrails/activity", with("colour", "red"), "entries[0].colour"},
      {"POST", "/v1/guardrails/activity", with("ts", "yesterday"), "entries[0].ts"},
      {"POST", "/v1/guardrails/activity", with("verdict", "maybe"), "entries[0].verdict"},
      {"POST", "/v1/guardrails/activity", with("hash", "abc"), "entries[0].hash"},
      {"POST", "/v1/guardrails/activity", with("llm", gone), "entries[0].llm"},
      {"POST", "/v1/guardrails/activity",
       with("llm", json{{"model", "m"}, {"in", -1}, {"out", 0}, {"cache", 0}, {"reasoning", 0}}), "entries[0].llm.in"},
      {"GET", "/v1/guardrails/usage?window=1y", "", "window"},
      {"GET", "/v1/guardrails/mcp-servers?window=1y", "", "window"},
      {"GET", "/v1/guardrails/activity?since=soon", "", "since"},
      {"GET", "/v1/guardrails/activity?limit=0", "", "limit"},
      {"GET", "/v1/guardrails/activity?cursor=x", "", "cursor"},
      {"GET", "/v1/guardrails/activity?verdict=perhaps", "", "verdict"},
      {"POST", "/v1/guardrails/approvals", R"({"identity":"a","host":"h","expires_at":")" + soon + "\"}", "request_id"},
      {"POST", "/v1/guardrails/approvals",
       R"({"request_id":"r","identity":"a","host":"h","expires_at":")" + soon + R"(","colour":1})", "colour"},
      {"POST", "/v1/guardrails/approvals", R"({"request_id":"r","identity":"a","host":"h","expires_at":"soon"})",
       "expires_at"},
      {"POST", "/v1/guardrails/approvals",
       R"({"request_id":"r","identity":"a","host":"h","expires_at":"2020-01-01T00:00:00Z"})", "expires_at"},
      {"GET", "/v1/guardrails/approvals/1/decision?wait=forever", "", "wait"},
      {"GET", "/v1/guardrails/approvals/1/decision?wait=61s", "", "wait"},
      {"PUT", "/v1/guardrails/policy", R"({"mode":"enforce","rules":[{"name":"x","action":"block","host":"h"}]})",
       "rules[0].action"},
      {"PUT", "/v1/guardrails/policy", R"({"mode":"sometimes"})", "mode"},
      {"GET", "/v1/guardrails/policy?since_version=x", "", "since_version"},
      {"PUT", "/v1/guardrails/proctor", R"({"enabled":true,"url":"https://p.example.com"})", "model"},
      {"PUT", "/v1/guardrails/proctor", R"({"enabled":false,"url":"ftp://p"})", "url"},
      {"PUT", "/v1/guardrails/proctor", R"({"enabled":false,"temperature":1})", "temperature"},
      {"POST", "/v1/guardrails/proctor/reviews", R"({"request_id":"r","identity":"a","decision":"maybe"})", "decision"},
      {"POST", "/v1/guardrails/proctor/reviews", R"({"request_id":"r","decision":"deny"})", "identity"},
      {"POST", "/v1/guardrails/proctor/reviews", R"({"request_id":"","identity":"a","decision":"deny"})", "request_id"},
  };
  for (const auto& row : rows) {
    const bool guard_route = row.path.find("/decision") != std::string::npos ||
                             (row.method == "POST" && row.path.find("/approvals") != std::string::npos) ||
                             (row.method == "POST" && row.path.find("/activity") != std::string::npos);
    auto r = call(row.method, row.path, guard_route ? t.guard : t.token, row.body);
    EXPECT_EQ(r.status, 400) << row.method << " " << row.path << " " << row.body.substr(0, 200) << ": "
                             << r.describe().substr(0, 300);
    const std::string field = r.json().value("field", "");
    EXPECT_NE(field.find(row.field), std::string::npos)
        << row.method << " " << row.path << ": field '" << field << "', expected '" << row.field
        << "': " << r.describe().substr(0, 300);
  }
  auto two = call("PUT", "/v1/guardrails/policy", t.token, R"({"rules":[{"name":"x","action":"deny","hots":"h"}]})");
  ASSERT_EQ(two.status, 400) << two.describe();
  ASSERT_GE(two.json()["errors"].size(), 2u) << two.body;  // the typo, and the rule left without a matcher
  EXPECT_EQ(two.json()["errors"][0]["field"], "rules[0].hots");
  EXPECT_TRUE(call("GET", "/v1/guardrails/activity", t.token).json()["entries"].empty()) << "bad input was stored";
  EXPECT_EQ(call("GET", "/v1/guardrails/policy", t.token).status, 404) << "a bad section was stored";
  EXPECT_TRUE(call("GET", "/v1/guardrails/approvals", t.token).json()["approvals"].empty());
}

TEST_P(GuardrailsTest, AGuardLearnsANewPolicyVersionWithinOneSecond) {
  Tenant t = tenant("acme");
  EXPECT_EQ(call("GET", "/v1/guardrails/policy", t.guard).status, 404);
  const std::string v1 = R"({"mode":"enforce","default_allow":true,"rules":[{"name":"no-secrets","action":"deny",)"
                         R"("path":"/secrets/","reason":"stays here"}]})";
  auto put = call("PUT", "/v1/guardrails/policy", t.token, v1);
  ASSERT_EQ(put.status, 201) << put.describe();
  EXPECT_EQ(put.json()["version"], 1);
  EXPECT_EQ(call("PUT", "/v1/guardrails/policy", t.token, v1).json()["changed"], false);
  auto got = call("GET", "/v1/guardrails/policy", t.guard).json();
  EXPECT_EQ(got["version"], 1);
  EXPECT_EQ(got["policy"]["rules"][0]["name"], "no-secrets");
  // Behind: answered at once. Current: held until the next version.
  EXPECT_EQ(call("GET", "/v1/guardrails/policy?since_version=0&wait=30s", t.guard, "", 2000).json()["version"], 1);
  auto poll = std::async(std::launch::async, [&] {
    auto r = call("GET", "/v1/guardrails/policy?since_version=1&wait=30s", t.guard, "", 35'000);
    return std::make_pair(r, Clock::now());
  });
  ASSERT_EQ(poll.wait_for(400ms), std::future_status::timeout);
  // A whole Policy document keeps its spec.guard.
  const auto sent = Clock::now();
  auto put2 = call("PUT", "/v1/guardrails/policy", t.token,
                   R"({"apiVersion":"faultline.dev/v1","kind":"Policy","metadata":{"name":"agents"},)"
                   R"("spec":{"guard":{"mode":"monitor","rules":[{"name":"prod","action":"approve","method":"POST",)"
                   R"("host":"*.prod.example.com"}]}}})");
  ASSERT_EQ(put2.status, 201) << put2.describe();
  auto [reply, at] = poll.get();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(at - sent).count(), 1000);
  EXPECT_EQ(reply.json()["version"], 2) << reply.describe();
  EXPECT_EQ(reply.json()["changed"], true);
  EXPECT_EQ(reply.json()["policy"]["rules"][0]["name"], "prod");
  // Nothing new within the wait: the same version, unchanged.
  auto idle = call("GET", "/v1/guardrails/policy?since_version=2&wait=300ms", t.guard);
  EXPECT_EQ(idle.json()["changed"], false) << idle.describe();
  EXPECT_EQ(audit(t, "guardrail.policy.put").size(), 2u);
}

TEST_P(GuardrailsTest, TheProctorsKeyIsStoredAndNeverReturned) {
  Tenant t = tenant("acme");
  auto empty = call("GET", "/v1/guardrails/proctor", t.token).json();
  EXPECT_EQ(empty["enabled"], false);
  auto put = call("PUT", "/v1/guardrails/proctor", t.token,
                  R"({"enabled":true,"model":"claude-haiku-4","url":"http://127.0.0.1:9/v1/messages",)"
                  R"("api_key":"sk-secret-123","timeout_ms":5000})");
  ASSERT_EQ(put.status, 200) << put.describe();
  EXPECT_EQ(put.body.find("sk-secret-123"), std::string::npos) << put.body;
  auto got = call("GET", "/v1/guardrails/proctor", t.token);
  EXPECT_EQ(got.body.find("sk-secret-123"), std::string::npos) << got.body;
  EXPECT_EQ(got.json()["api_key_set"], true);
  EXPECT_EQ(got.json()["model"], "claude-haiku-4");
  // Without api_key the stored one stays; "" clears it.
  EXPECT_EQ(call("PUT", "/v1/guardrails/proctor", t.token, R"({"enabled":false})").json()["api_key_set"], true);
  EXPECT_EQ(call("PUT", "/v1/guardrails/proctor", t.token, R"({"enabled":false,"api_key":""})").json()["api_key_set"],
            false);
  const json exported = call("GET", "/v1/audit/export", t.token).json();
  for (const auto& e : exported["entries"])
    EXPECT_EQ(e.dump().find("sk-secret-123"), std::string::npos) << "the key is in the audit log";
  EXPECT_EQ(call("GET", "/v1/guardrails/proctor", t.guard).status, 403) << "a guard read the settings";
  // A guard's proctor reports its reviews: audited, nothing else stored.
  auto review = call("POST", "/v1/guardrails/proctor/reviews", t.guard,
                     R"({"request_id":"req_1_2","identity":"alice@laptop","decision":"escalate",)"
                     R"("reason":"not sure","model":"claude-haiku-4"})");
  ASSERT_EQ(review.status, 201) << review.describe();
  auto entries = audit(t, "guardrail.proctor.escalate");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0]["object"], "request:req_1_2");
  const json detail =
      entries[0]["detail"].is_string() ? json::parse(entries[0]["detail"].get<std::string>()) : entries[0]["detail"];
  EXPECT_EQ(detail.value("model", ""), "claude-haiku-4") << entries[0];
  EXPECT_EQ(entries[0]["actor"].get<std::string>().rfind("agent:", 0), 0u) << entries[0];
}

INSTANTIATE_TEST_SUITE_P(Backends, GuardrailsTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

// The real faultcp binary: activity posted, faultcp stopped (SIGTERM, then
// kill -9) and started again on the same database; the guard's retried batch
// is all duplicates, nothing was lost, and the chain continues.
class GuardRestartTest : public ::testing::TestWithParam<Backend> {};

TEST_P(GuardRestartTest, ARetriedBatchAfterARestartIsDeduplicatedAndNothingIsLost) {
  fltest::TestDatabase db(GetParam());
  auto start = [&] {
    auto cp = fltest::ChildProcess::spawn({FAULTCP_PATH, "serve", "--listen", "127.0.0.1:0", "--database", db.url()});
    auto line = cp.wait_line_starting("faultcp: listening on", 20s);
    if (!line) ADD_FAILURE() << cp.describe();
    uint16_t port = 0;
    if (line) port = static_cast<uint16_t>(std::stoul(line->substr(line->find("127.0.0.1:") + 10)));
    return std::make_pair(std::move(cp), port);
  };
  auto [first, port] = start();
  ASSERT_NE(port, 0);
  auto signup = fltest::cp_request(port, "POST", "/v1/auth/signup", "",
                                   R"({"email":"a@example.com","password":"correct horse battery","workspace":"w"})");
  const std::string token = signup.json().value("token", "");
  const std::string enroll =
      fltest::cp_request(port, "POST", "/v1/tokens", token, R"({"kind":"enrollment"})").json().value("token", "");
  const std::string guard =
      fltest::cp_request(port, "POST", "/v1/agents/register", enroll, R"({"hostname":"g"})").json().value("token", "");
  ChainBuilder chain;
  std::vector<faultline::ActivityEntry> one, two;
  for (int i = 0; i < 20; ++i) one.push_back(chain.next(i % 2 ? "alice" : "bob", i == 5 ? "deny" : "allow"));
  for (int i = 0; i < 10; ++i) two.push_back(chain.next("alice"));
  auto r = fltest::cp_request(port, "POST", "/v1/guardrails/activity", guard, batch(one));
  ASSERT_EQ(r.status, 200) << r.describe();
  EXPECT_EQ(r.json()["stored"], 20);
  // The second batch lands, but the guard never hears: faultcp dies first.
  EXPECT_EQ(fltest::cp_request(port, "POST", "/v1/guardrails/activity", guard, batch(two)).json()["stored"], 10);
  first.kill_and_reap();

  auto [second, port2] = start();
  ASSERT_NE(port2, 0);
  auto retry = fltest::cp_request(port2, "POST", "/v1/guardrails/activity", guard, batch(two));
  ASSERT_EQ(retry.status, 200) << retry.describe();
  EXPECT_EQ(retry.json()["stored"], 0) << retry.body;
  EXPECT_EQ(retry.json()["duplicates"], 10);
  EXPECT_EQ(retry.json()["stored_through"]["alice"], 20);
  auto more = fltest::cp_request(port2, "POST", "/v1/guardrails/activity", guard, batch({chain.next("alice")}));
  EXPECT_EQ(more.json()["stored"], 1);
  EXPECT_TRUE(more.json()["flagged"].empty()) << "the chain did not continue across the restart: " << more.body;
  auto all = fltest::cp_request(port2, "GET", "/v1/guardrails/activity?limit=1000", token).json()["entries"];
  EXPECT_EQ(all.size(), 31u);
  for (const auto& e : all) EXPECT_EQ(e["chain"], "ok") << e;
  auto sum = fltest::cp_request(port2, "GET", "/v1/guardrails/activity/summary", token).json()["identities"];
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0]["last_seq"], 21);  // alice: 10 + 10 + 1
  EXPECT_EQ(sum[1]["last_seq"], 10);
  size_t blocks = 0;
  const json exported = fltest::cp_request(port2, "GET", "/v1/audit/export", token).json();
  for (const auto& e : exported["entries"]) blocks += e["action"] == "guardrail.block" ? 1 : 0;
  EXPECT_EQ(blocks, 1u);
  second.signal(SIGTERM);
  EXPECT_TRUE(second.wait(10s).has_value());
}

INSTANTIATE_TEST_SUITE_P(Backends, GuardRestartTest, ::testing::Values(Backend::Sqlite, Backend::Postgres),
                         [](const auto& info) { return fltest::backend_name(info.param); });

}  // namespace guardrails_test

namespace guardrails_test {

// The shared LLM budget: reserve-then-settle, one transaction per
// reservation, so 20 guards' calls at once with budget for 10 admit exactly 10.
TEST_P(GuardrailsTest, TheSharedBudgetAdmitsExactlyItsLimitOfConcurrentReservations) {
  Tenant t = tenant("acme");
  Tenant other = tenant("other");
  const json ask = {
      {"identity", "alice@laptop"}, {"window_s", 86400}, {"tokens", 100}, {"request_limit", 10}, {"token_limit", 5000}};
  std::vector<std::future<CpReply>> calls;
  for (int i = 0; i < 20; ++i)
    calls.push_back(std::async(std::launch::async,
                               [&] { return call("POST", "/v1/guardrails/budget/reserve", t.guard, ask.dump()); }));
  std::vector<int64_t> ids;
  int refused = 0;
  for (auto& f : calls) {
    auto r = f.get();
    ASSERT_EQ(r.status, 200) << r.describe();
    if (r.json()["admitted"] == true) {
      ids.push_back(r.json()["reservation"].get<int64_t>());
    } else {
      ++refused;
      EXPECT_EQ(r.json()["refused"], "requests") << r.body;
      EXPECT_EQ(r.json()["reason"], "LLM request budget exhausted: 10 of 10 calls per 1d used") << r.body;
    }
  }
  EXPECT_EQ(ids.size(), 10u);
  EXPECT_EQ(refused, 10);
  auto charge = call("GET", "/v1/guardrails/budget?identity=alice%40laptop&window_s=86400", t.guard).json();
  EXPECT_EQ(charge["tokens"], 1000) << charge;
  EXPECT_EQ(charge["requests"], 10) << charge;
  // Settled to what was billed; released (the call never went up) gives the request back.
  auto s = call("POST", "/v1/guardrails/budget/settle", t.guard, json{{"reservation", ids[0]}, {"output", 7}}.dump());
  EXPECT_EQ(s.json()["settled"], true) << s.describe();
  EXPECT_EQ(call("POST", "/v1/guardrails/budget/settle", t.guard, json{{"reservation", ids[0]}, {"output", 7}}.dump())
                .json()["settled"],
            false)
      << "settled twice";
  EXPECT_EQ(
      call("POST", "/v1/guardrails/budget/release", t.guard, json{{"reservation", ids[1]}}.dump()).json()["released"],
      true);
  charge = call("GET", "/v1/guardrails/budget?identity=alice%40laptop&window_s=86400", t.token).json();
  EXPECT_EQ(charge["tokens"], 807) << charge;
  EXPECT_EQ(charge["requests"], 9) << charge;
  // The token limit: 4193 left, a call of 5000 does not fit.
  auto big =
      call("POST", "/v1/guardrails/budget/reserve", t.guard,
           json{{"identity", "alice@laptop"}, {"window_s", 86400}, {"tokens", 5000}, {"token_limit", 5000}}.dump())
          .json();
  EXPECT_EQ(big["admitted"], false) << big;
  EXPECT_EQ(big["refused"], "tokens") << big;
  // Another window length, another identity, another workspace: other counters.
  EXPECT_EQ(call("POST", "/v1/guardrails/budget/reserve", t.guard,
                 json{{"identity", "alice@laptop"}, {"window_s", 3600}, {"tokens", 1}, {"request_limit", 1}}.dump())
                .json()["admitted"],
            true);
  EXPECT_EQ(call("POST", "/v1/guardrails/budget/reserve", other.guard, ask.dump()).json()["admitted"], true);
  EXPECT_EQ(
      call("POST", "/v1/guardrails/budget/settle", other.guard, json{{"reservation", ids[2]}, {"output", 0}}.dump())
          .json()["settled"],
      false)
      << "another workspace settled a reservation";
  // Bad input, named.
  for (const auto& [body, field] : std::vector<std::pair<json, std::string>>{
           {{{"window_s", 60}, {"tokens", 1}, {"request_limit", 1}}, "identity"},
           {{{"identity", "a"}, {"window_s", 0}, {"tokens", 1}, {"request_limit", 1}}, "window_s"},
           {{{"identity", "a"}, {"window_s", 60}, {"tokens", -1}, {"request_limit", 1}}, "tokens"},
           {{{"identity", "a"}, {"window_s", 60}, {"tokens", 1}}, "token_limit"},
           {{{"identity", "a"}, {"window_s", 60}, {"tokens", 1}, {"request_limit", 1}, {"x", 1}}, "x"},
       }) {
    auto r = call("POST", "/v1/guardrails/budget/reserve", t.guard, body.dump());
    EXPECT_EQ(r.status, 400) << body << " " << r.describe();
    EXPECT_EQ(r.json().value("field", ""), field) << r.body;
  }
  EXPECT_EQ(call("POST", "/v1/guardrails/budget/settle", t.guard, R"({"reservation":1})").json().value("field", ""),
            "output");
  EXPECT_EQ(call("GET", "/v1/guardrails/budget?identity=a&window_s=x", t.guard).status, 400);
  EXPECT_EQ(call("POST", "/v1/guardrails/budget/reserve", "", ask.dump()).status, 401);
}

}  // namespace guardrails_test
