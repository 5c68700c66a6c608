// libFuzzer target: any bytes from a Postgres client and its server through
// the gate's PgSession (startup, framing, SQL facts from libpg_query, the
// rewrites of R, K and E), in the pieces the input chooses; held messages are
// settled as they come, approved and denied in turn.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/guard/pg_session.h"

namespace {

std::shared_ptr<const faultline::GuardPolicy> make_policy() {
  faultline::GuardPolicy p;
  p.mode = faultline::GuardMode::Enforce;
  faultline::GuardRule deny;
  deny.name = "no-drop";
  deny.action = faultline::GuardVerdict::Deny;
  deny.sql_verb = "DROP";
  faultline::GuardRule hold;
  hold.name = "ask";
  hold.action = faultline::GuardVerdict::Approve;
  hold.sql_table = "prod.*";
  p.rules = {deny, hold};
  return std::make_shared<const faultline::GuardPolicy>(std::move(p));
}

}  // namespace

// Input: chunks of [side and length byte][bytes]: the top bit says the server,
// the low 7 bits the length (0: the rest of the input).
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto policy = make_policy();
  static const auto keys = std::make_shared<faultline::PgCancelKeys>();
  faultline::PgSessionOptions o;
  o.policy = [] { return policy; };
  o.cancel_keys = keys;
  o.max_message = 4096;  // small, so the oversized path is reached
  faultline::PgSession session(std::move(o));
  std::string_view in(reinterpret_cast<const char*>(data), size);
  bool closed = false, approve = true;
  while (!in.empty()) {
    const uint8_t head = uint8_t(in[0]);
    in.remove_prefix(1);
    size_t n = head & 0x7f;
    if (n == 0 || n > in.size()) n = in.size();
    const std::string_view chunk = in.substr(0, n);
    in.remove_prefix(n);
    faultline::PgOutput out = (head & 0x80) ? session.from_server(chunk) : session.from_client(chunk);
    while (out.held) {
      out = session.settle(approve, "fuzz");
      approve = !approve;
    }
    if (out.close && !(head & 0x80)) closed = true;
    // Once the gate closed the client's side, nothing more goes upstream from it.
    if (closed && !(head & 0x80) && !out.close && !out.to_server.empty()) __builtin_trap();
  }
  return 0;
}
