// The stand-in model server (stand_in_model.h).
#include "stand_in_model.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <stdexcept>

namespace florch {

using faultline::ModelProvider;
using nlohmann::json;

json good_proposal() {
  return {{"template", "cpu_stress_one"},
          {"params", {{"load", 50}, {"duration_s", 60}}},
          {"hypothesis", {{"sli", "burn_rate_5m"}, {"threshold", 1}, {"statement", "checkout keeps burn under 1x"}}},
          {"abort_burn_rate_5m", 4},
          {"reasoning", "two ready replicas, a healthy SLO, and no CPU experiment in the last week"}};
}

// Reads first, then proposes: the usual two turns.
Script read_then(json proposal) {
  return [proposal](int turn, const json&) {
    if (turn == 1) return Turn{"", {{"service_profile", json::object()}, {"slo_status", json::object()}}};
    return Turn{"", {{"propose_experiment", proposal}}};
  };
}

std::string provider_body(ModelProvider p, const Turn& t, int turn) {
  if (p == ModelProvider::Anthropic) {
    json content = json::array();
    if (!t.text.empty()) content.push_back({{"type", "text"}, {"text", t.text}});
    for (size_t i = 0; i < t.calls.size(); ++i)
      content.push_back({{"type", "tool_use"},
                         {"id", "toolu_" + std::to_string(turn) + "_" + std::to_string(i)},
                         {"name", t.calls[i].name},
                         {"input", t.calls[i].input}});
    return json{{"id", "msg_" + std::to_string(turn)},
                {"type", "message"},
                {"role", "assistant"},
                {"model", "stand-in"},
                {"content", content},
                {"stop_reason", t.calls.empty() ? "end_turn" : "tool_use"},
                {"usage", {{"input_tokens", t.input_tokens}, {"output_tokens", t.output_tokens}}}}
        .dump();
  }
  json msg = {{"role", "assistant"}, {"content", t.text.empty() ? json(nullptr) : json(t.text)}};
  if (!t.calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < t.calls.size(); ++i)
      calls.push_back({{"id", "call_" + std::to_string(turn) + "_" + std::to_string(i)},
                       {"type", "function"},
                       {"function", {{"name", t.calls[i].name}, {"arguments", t.calls[i].input.dump()}}}});
    msg["tool_calls"] = calls;
  }
  return json{
      {"id", "chatcmpl-" + std::to_string(turn)},
      {"object", "chat.completion"},
      {"model", "stand-in"},
      {"choices", {{{"index", 0}, {"message", msg}, {"finish_reason", t.calls.empty() ? "stop" : "tool_calls"}}}},
      {"usage",
       {{"prompt_tokens", t.input_tokens},
        {"completion_tokens", t.output_tokens},
        {"total_tokens", t.input_tokens + t.output_tokens}}}}
      .dump();
}

StandInModel::StandInModel(faultline::ModelProvider p, Script script) : p_(p), script_(std::move(script)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("stand-in model: no loopback socket");
  port_ = ntohs(a.sin_port);
  th_ = std::thread([this] { serve(); });
}

StandInModel::~StandInModel() {
  stop_ = true;
  th_.join();
  ::close(fd_);
}

void StandInModel::set_script(Script script) {
  std::lock_guard<std::mutex> l(mu_);
  script_ = std::move(script);
  calls_ = 0;
  seen_.clear();
}

std::vector<StandInModel::Seen> StandInModel::seen() {
  std::lock_guard<std::mutex> l(mu_);
  return seen_;
}

void StandInModel::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    timeval tv{5, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string req;
    char buf[8192];
    size_t want = std::string::npos;
    for (;;) {
      if (want == std::string::npos) {
        auto end = req.find("\r\n\r\n");
        if (end != std::string::npos) {
          size_t cl = 0;
          std::string head = req.substr(0, end);
          for (auto& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          if (auto at = head.find("content-length:"); at != std::string::npos) cl = std::stoul(head.substr(at + 15));
          want = end + 4 + cl;
        }
      }
      if (want != std::string::npos && req.size() >= want) break;
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    const auto end = req.find("\r\n\r\n");
    std::string out;
    if (end != std::string::npos) {
      Seen s{req.substr(0, end), json::parse(req.substr(end + 4), nullptr, false)};
      std::string body;
      {
        std::lock_guard<std::mutex> l(mu_);
        const int turn = calls_.fetch_add(1) + 1;
        body = provider_body(p_, script_(turn, s.body), turn);
        seen_.push_back(std::move(s));
      }
      out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\nConnection: close\r\n\r\n" + body;
    }
    for (size_t sent = 0; sent < out.size();) {
      ssize_t n = ::send(c, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(c);
  }
}

}  // namespace florch
