// The RequestJudge's body stage and transformers, through the forward proxy on
// loopback: a body fed to judge_body piece by piece (split over many reads,
// chunked or not), held while the judge holds, forwarded as received or
// rewritten with a new Content-Length; header fields set upstream; a response
// transformer that changes the length the client gets. No root.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "selftests/proxy/proxy_fixture.h"
#include "userspace/proxy/proxy_registry.h"

namespace {

using faultline::ByteTransformer;
using faultline::HeldRequest;
using faultline::RequestBodyChunk;
using faultline::RequestHead;
using faultline::RequestVerdict;
using fltest::UniqueFd;
using namespace std::chrono_literals;

// Answers every head with need_body, gathers the body, and at its end gives
// what `final_verdict` says.
class BodyJudge : public faultline::RequestJudge {
 public:
  std::function<RequestVerdict(uint64_t id, const HeldRequest&)> final_verdict;

  RequestVerdict judge(const RequestHead& head, HeldRequest) override {
    std::lock_guard lock(mu_);
    last_id_ = head.id;
    return RequestVerdict::need_body();
  }
  RequestVerdict judge_body(uint64_t id, const RequestBodyChunk& chunk, HeldRequest later) override {
    {
      std::lock_guard lock(mu_);
      bodies_[id].append(chunk.bytes);
      ++calls_[id];
      if (chunk.over_cap) over_cap_ = true;
      if (chunk.end) ended_ = true;
      holds_[id] = later;
    }
    cv_.notify_all();
    if (!chunk.end) return RequestVerdict::need_body();
    return final_verdict ? final_verdict(id, later) : RequestVerdict::forward();
  }
  void withdrawn(uint64_t id) override {
    std::lock_guard lock(mu_);
    withdrawn_.push_back(id);
    cv_.notify_all();
  }
  void on_response_bytes(uint64_t id, std::string_view bytes, bool end) override {
    std::lock_guard lock(mu_);
    responses_[id].append(bytes);
    if (end) response_ended_ = true;
  }

  bool wait_ended(std::chrono::milliseconds t = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, t, [&] { return ended_; });
  }
  std::string body() {
    std::lock_guard lock(mu_);
    return bodies_[last_id_];
  }
  int calls() {
    std::lock_guard lock(mu_);
    return calls_[last_id_];
  }
  uint64_t last_id() {
    std::lock_guard lock(mu_);
    return last_id_;
  }
  HeldRequest hold() {
    std::lock_guard lock(mu_);
    return holds_[last_id_];
  }
  std::string response() {
    std::lock_guard lock(mu_);
    return responses_[last_id_];
  }
  bool withdrawn_wait(std::chrono::milliseconds t = 5s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, t, [&] { return !withdrawn_.empty(); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t last_id_ = 0;
  std::map<uint64_t, std::string> bodies_;
  std::map<uint64_t, int> calls_;
  std::map<uint64_t, HeldRequest> holds_;
  std::map<uint64_t, std::string> responses_;
  std::vector<uint64_t> withdrawn_;
  bool over_cap_ = false;
  bool ended_ = false;
  bool response_ended_ = false;
};

// An upstream that reads one request (head, then a Content-Length or chunked
// body) and answers `answer`; what it read is kept.
class RecordingUpstream {
 public:
  explicit RecordingUpstream(std::string answer = {})
      : answer_(std::move(answer)), server_([this](UniqueFd fd) { serve(std::move(fd)); }) {}
  [[nodiscard]] uint16_t port() const { return server_.port(); }
  std::string seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  int requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void serve(UniqueFd fd) {
    std::string got;
    char b[65536];
    auto complete = [&] {
      const size_t end = got.find("\r\n\r\n");
      if (end == std::string::npos) return false;
      const std::string head = got.substr(0, end);
      const size_t cl = head.find("Content-Length: ");
      if (cl != std::string::npos) return got.size() >= end + 4 + std::stoul(head.substr(cl + 16));
      if (head.find("chunked") != std::string::npos) return got.find("\r\n0\r\n\r\n", end) != std::string::npos;
      return true;
    };
    while (!complete()) {
      ssize_t n = ::recv(fd.get(), b, sizeof b, 0);
      if (n <= 0) return;
      got.append(b, size_t(n));
    }
    {
      std::lock_guard lock(mu_);
      seen_ = got;
      ++requests_;
    }
    const std::string body = "ok";
    fltest::send_all(fd.get(), !answer_.empty() ? answer_
                                                : "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                                                      std::to_string(body.size()) + "\r\n\r\n" + body);
  }

  std::string answer_;
  std::mutex mu_;
  std::string seen_;
  int requests_ = 0;
  fltest::ScriptServer server_;
};

// Replaces every "cat" by "tiger" (the whole body at once: the proxy feeds a held body whole).
class CatToTiger : public ByteTransformer {
 public:
  std::string feed(std::string_view bytes) override {
    std::string out;
    for (size_t i = 0; i < bytes.size();) {
      if (bytes.substr(i, 3) == "cat") {
        out += "tiger";
        i += 3;
      } else {
        out += bytes[i++];
      }
    }
    return out;
  }
  std::string finish() override { return {}; }
};

// Holds the whole response and gives the client another one, longer.
class LongerAnswer : public ByteTransformer {
 public:
  std::string feed(std::string_view bytes) override {
    seen_.append(bytes);
    return {};
  }
  std::string finish() override {
    const std::string body = "transformed: " + seen_.substr(seen_.find("\r\n\r\n") + 4);
    return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n\r\n" + body;
  }

 private:
  std::string seen_;
};

class JudgeHooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    faultline::ProxyOptions po;
    po.workers = 1;
    auto reg = faultline::ProxyRegistry::start(po);
    ASSERT_TRUE(reg.ok()) << reg.error().describe();
    proxies_ = std::move(*reg);
    faultline::ProxyConfig pc;
    pc.name = "hooks";
    pc.listen = "127.0.0.1:0";
    pc.forward = faultline::ForwardProxy{judge_, {}};
    auto info = proxies_->create(pc);
    ASSERT_TRUE(info.ok()) << info.error().describe();
    port_ = fltest::port_of(info->listen_bound);
  }

  // A POST through the proxy whose body goes in `pieces` sends (a pause between them).
  UniqueFd post(uint16_t upstream, const std::string& body, size_t pieces, const std::string& extra_headers = {}) {
    UniqueFd fd = fltest::connect_loopback(port_, 5000);
    fltest::send_all(fd.get(), "POST http://127.0.0.1:" + std::to_string(upstream) +
                                   "/v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n");
    const size_t step = (body.size() + pieces - 1) / pieces;
    for (size_t at = 0; at < body.size(); at += step) {
      fltest::send_all(fd.get(), body.substr(at, step));
      std::this_thread::sleep_for(2ms);
    }
    return fd;
  }

  std::shared_ptr<BodyJudge> judge_ = std::make_shared<BodyJudge>();
  std::unique_ptr<faultline::ProxyRegistry> proxies_;
  uint16_t port_ = 0;
};

std::string body_of(const std::string& http) { return http.substr(http.find("\r\n\r\n") + 4); }

TEST_F(JudgeHooksTest, BodySplitAcrossManyReadsReachesTheJudgeWholeAndTheUpstreamAsSent) {
  RecordingUpstream up;
  std::string body;
  for (int i = 0; body.size() < 20000; ++i) body += "{\"piece\":" + std::to_string(i) + "}";
  UniqueFd fd = post(up.port(), body, 40);
  auto got = fltest::read_to_end(fd.get());
  EXPECT_NE(got.data.find("200 OK"), std::string::npos) << got.data;
  EXPECT_EQ(judge_->body(), body);
  EXPECT_GT(judge_->calls(), 1) << "one judge_body call per piece that arrived";
  EXPECT_EQ(body_of(up.seen()), body);
  EXPECT_NE(up.seen().find("Content-Length: " + std::to_string(body.size())), std::string::npos);
}

TEST_F(JudgeHooksTest, NothingGoesUpstreamWhileTheJudgeHoldsThenTheHeldBodyIsForwarded) {
  RecordingUpstream up;
  judge_->final_verdict = [](uint64_t, const HeldRequest&) { return RequestVerdict::hold(); };
  const std::string body(5000, 'b');
  UniqueFd fd = post(up.port(), body, 5);
  ASSERT_TRUE(judge_->wait_ended());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(up.requests(), 0);
  ASSERT_TRUE(judge_->hold().complete(RequestVerdict::forward()));
  auto got = fltest::read_to_end(fd.get());
  EXPECT_NE(got.data.find("200 OK"), std::string::npos) << got.data;
  EXPECT_EQ(body_of(up.seen()), body);
}

TEST_F(JudgeHooksTest, AHeldBodyAnsweredNeverReachesTheUpstream) {
  RecordingUpstream up;
  judge_->final_verdict = [](uint64_t, const HeldRequest&) { return RequestVerdict::hold(); };
  UniqueFd fd = post(up.port(), std::string(3000, 'c'), 3);
  ASSERT_TRUE(judge_->wait_ended());
  const std::string no = "HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno";
  ASSERT_TRUE(judge_->hold().complete(RequestVerdict::answer(no)));
  auto got = fltest::read_to_end(fd.get());
  EXPECT_EQ(got.data, no);
  EXPECT_EQ(up.requests(), 0);
}

TEST_F(JudgeHooksTest, TransformerChangesTheBodyLengthAndHeaderFieldsAreSet) {
  RecordingUpstream up;
  judge_->final_verdict = [](uint64_t, const HeldRequest&) {
    RequestVerdict v = RequestVerdict::forward();
    v.request_body = std::make_shared<CatToTiger>();
    v.set_headers = {{"Accept-Encoding", "identity"}};
    return v;
  };
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "a cat ";
  UniqueFd fd = post(up.port(), body, 10, "accept-encoding: gzip, br\r\n");
  auto got = fltest::read_to_end(fd.get());
  EXPECT_NE(got.data.find("200 OK"), std::string::npos) << got.data;
  std::string want;
  for (int i = 0; i < 1000; ++i) want += "a tiger ";
  const std::string seen = up.seen();
  EXPECT_EQ(body_of(seen), want);
  EXPECT_NE(seen.find("Content-Length: " + std::to_string(want.size()) + "\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("Content-Length: " + std::to_string(body.size())), std::string::npos) << seen;
  EXPECT_NE(seen.find("Accept-Encoding: identity\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("gzip"), std::string::npos) << seen;
}

TEST_F(JudgeHooksTest, ChunkedBodyIsDechunkedForTheJudgeAndSentWithItsNewLength) {
  RecordingUpstream up;
  judge_->final_verdict = [](uint64_t, const HeldRequest&) {
    RequestVerdict v = RequestVerdict::forward();
    v.request_body = std::make_shared<CatToTiger>();
    return v;
  };
  UniqueFd fd = fltest::connect_loopback(port_, 5000);
  fltest::send_all(fd.get(), "POST http://127.0.0.1:" + std::to_string(up.port()) +
                                 "/v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (const char* piece : {"4\r\none \r\n", "4\r\ncat \r\n", "3\r\nend\r\n", "0\r\n\r\n"}) {
    fltest::send_all(fd.get(), piece);
    std::this_thread::sleep_for(5ms);
  }
  auto got = fltest::read_to_end(fd.get());
  EXPECT_NE(got.data.find("200 OK"), std::string::npos) << got.data;
  EXPECT_EQ(judge_->body(), "one cat end");
  const std::string seen = up.seen();
  EXPECT_EQ(body_of(seen), "one tiger end");
  EXPECT_NE(seen.find("Content-Length: 13\r\n"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("chunked"), std::string::npos) << seen;
}

TEST_F(JudgeHooksTest, ResponseTransformerGivesTheClientALongerAnswerAndTheJudgeSeesTheRawOne) {
  RecordingUpstream up("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello");
  judge_->final_verdict = [](uint64_t, const HeldRequest&) {
    RequestVerdict v = RequestVerdict::forward(/*observe=*/true);
    v.response_body = std::make_shared<LongerAnswer>();
    return v;
  };
  UniqueFd fd = post(up.port(), "{}", 1);
  auto got = fltest::read_to_end(fd.get());
  EXPECT_EQ(body_of(got.data), "transformed: hello") << got.data;
  EXPECT_NE(got.data.find("Content-Length: 18\r\n"), std::string::npos) << got.data;
  EXPECT_EQ(body_of(judge_->response()), "hello");
}

TEST_F(JudgeHooksTest, ARequestWithoutABodyGetsOneEndCall) {
  RecordingUpstream up;
  UniqueFd fd = fltest::connect_loopback(port_, 5000);
  fltest::send_all(fd.get(),
                   "GET http://127.0.0.1:" + std::to_string(up.port()) + "/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  auto got = fltest::read_to_end(fd.get());
  EXPECT_NE(got.data.find("200 OK"), std::string::npos) << got.data;
  EXPECT_EQ(judge_->calls(), 1);
  EXPECT_EQ(judge_->body(), "");
}

TEST_F(JudgeHooksTest, AClientThatLeavesMidBodyWithdrawsIt) {
  RecordingUpstream up;
  {
    UniqueFd fd = fltest::connect_loopback(port_, 5000);
    fltest::send_all(fd.get(), "POST http://127.0.0.1:" + std::to_string(up.port()) +
                                   "/v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nhalf");
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(judge_->withdrawn_wait());
  EXPECT_EQ(up.requests(), 0);
}

}  // namespace
