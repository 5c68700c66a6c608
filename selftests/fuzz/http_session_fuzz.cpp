// libFuzzer target: HttpSession, the proxy's HTTP state machine, reads the bytes
// of any client and any upstream. The input is "RULES|CLIENT<sep>SERVER": the
// first byte picks the fault the rules hold (and how reads are cut), the rest is
// split at the first 0xff into what the client and the server send. The driver
// does what the relay does with each step; every step must stay inside the
// bytes it was given, and the session must reach a state where nothing moves.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "userspace/proxy/http_session.h"

namespace {

faultline::HttpRules rules_for(uint8_t pick) {
  faultline::HttpRules rules;
  rules.limits.max_header_bytes = 1024;
  rules.limits.max_headers = 8;
  faultline::HttpFault f;
  f.name = "f";
  switch (pick % 7) {
    case 0:
      return rules;  // clean
    case 1:
      f.type = faultline::HttpFaultType::status;
      f.status = 503;
      f.body = "down";
      break;
    case 2:
      f.type = faultline::HttpFaultType::truncate;
      f.bytes = pick / 7;
      break;
    case 3:
      f.type = faultline::HttpFaultType::abort_stream;
      f.events = 1 + pick / 64;
      break;
    case 4:
      f.type = faultline::HttpFaultType::llm;
      f.preset = faultline::LlmPreset::rate_limit;
      f.attempts = 1;
      break;
    case 5:
      f.type = faultline::HttpFaultType::delay;
      f.delay_ms = 1;
      f.where = pick & 8 ? faultline::DelayPoint::response : faultline::DelayPoint::request;
      break;
    default:
      f.type = faultline::HttpFaultType::reset;
      f.match.path = "/r*";
      break;
  }
  f.percent = pick & 16 ? 50 : 100;
  f.first_n = pick & 32 ? 1 : 0;  // a pipelined second request passes
  rules.faults.push_back({f, std::make_shared<std::atomic<uint64_t>>(0)});
  return rules;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t pick = data[0];
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t sep = all.find('\xff');
  std::string_view client = all.substr(0, sep);
  std::string_view server = sep == std::string_view::npos ? std::string_view{} : all.substr(sep + 1);
  const size_t step = 1 + (pick >> 5) * 3;  // reads of 1..22 bytes

  const faultline::HttpRules rules = rules_for(pick);
  faultline::HttpSession s("upstream.test", pick);
  size_t c_avail = 0;  // bytes of `client` received so far (the rest not yet)
  size_t s_avail = 0;
  bool closed = false;
  for (int rounds = 0; rounds < 100000 && !closed; ++rounds) {
    bool moved = false;
    // The client side, on what has been received.
    for (int i = 0; i < 64 && !closed; ++i) {
      const std::string_view in = client.substr(0, c_avail);
      const faultline::HttpStep st = s.client_step(in, rules);
      if ((st.act == faultline::HttpAct::consume || st.act == faultline::HttpAct::drop ||
           st.act == faultline::HttpAct::forward || st.act == faultline::HttpAct::cut) &&
          st.bytes > in.size())
        __builtin_trap();
      if (st.act == faultline::HttpAct::consume || st.act == faultline::HttpAct::drop ||
          st.act == faultline::HttpAct::forward) {
        client.remove_prefix(st.bytes);
        c_avail -= st.bytes;
        moved = moved || st.bytes > 0;
        if (st.bytes == 0) break;
      } else if (st.act == faultline::HttpAct::send_head) {
        if (s.head().empty()) __builtin_trap();
        s.head_sent();
        moved = true;
      } else if (st.act == faultline::HttpAct::respond) {
        const std::string answer = s.take_answer();
        if (answer.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
        s.answer_sent();
        moved = true;
        if (s.answer_closes()) closed = true;
      } else if (st.act == faultline::HttpAct::sleep) {
        moved = true;
      } else if (st.act == faultline::HttpAct::reset || st.act == faultline::HttpAct::cut) {
        closed = true;
      } else {
        break;
      }
    }
    // The server side.
    for (int i = 0; i < 64 && !closed; ++i) {
      const std::string_view in = server.substr(0, s_avail);
      const faultline::HttpStep st = s.server_step(in);
      if ((st.act == faultline::HttpAct::forward || st.act == faultline::HttpAct::cut) && st.bytes > in.size())
        __builtin_trap();
      if (st.act == faultline::HttpAct::forward) {
        server.remove_prefix(st.bytes);
        s_avail -= st.bytes;
        moved = moved || st.bytes > 0;
        if (st.bytes == 0) break;
      } else if (st.act == faultline::HttpAct::cut) {
        closed = true;
      } else if (st.act == faultline::HttpAct::sleep) {
        moved = true;
      } else {
        break;
      }
      (void)s.take_kick();
    }
    if (s.in_head() && rounds % 7 == 6) s.head_timed_out();
    // More bytes arrive on both sides.
    const size_t c_more = std::min(step, client.size() - c_avail);
    const size_t s_more = std::min(step, server.size() - s_avail);
    c_avail += c_more;
    s_avail += s_more;
    if (!moved && c_more == 0 && s_more == 0) break;
  }
  return 0;
}
