// libFuzzer target: ClickHouse SQL, any bytes (the first line a request
// target, the rest its body in two pieces): the tokenizer's facts and the
// request reader's, judged by SQL rules, with invariants that hold for every
// input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/guard/clickhouse_sql.h"
#include "userspace/guard/guard_policy.h"

namespace {

const faultline::GuardPolicy& policy() {
  static const faultline::GuardPolicy p = [] {
    faultline::GuardPolicy g;
    g.mode = faultline::GuardMode::Enforce;
    faultline::GuardRule deny;
    deny.name = "no-drop";
    deny.action = faultline::GuardVerdict::Deny;
    deny.sql_verb = "DROP";
    faultline::GuardRule allow;
    allow.name = "reads";
    allow.action = faultline::GuardVerdict::Allow;
    allow.sql_verb = "SELECT";
    g.rules = {deny, allow};
    g.default_allow = false;
    return g;
  }();
  return p;
}

void check(const faultline::SqlFacts& f) {
  if (!f.parsed && (f.error.empty() || !f.statements.empty())) __builtin_trap();
  for (const auto& s : f.statements)
    if (s.verbs.empty()) __builtin_trap();  // every statement read has its kind
  const faultline::GuardDecision http{faultline::GuardVerdict::Allow, "", "", true, false};
  const faultline::GuardDecision d = faultline::decide_sql_request(policy(), f, http);
  // SQL the guard cannot read is never let through.
  if (!f.parsed && d.verdict == faultline::GuardVerdict::Allow) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  for (bool whole : {true, false}) {
    const faultline::ClickHouseSqlFacts f = faultline::clickhouse_sql_facts(in, whole);
    check(f.facts);
    if (!whole && !f.data_begun && f.facts.parsed) __builtin_trap();  // a cut text is settled only by data
  }
  const size_t nl = in.find('\n');
  const std::string_view target = nl == std::string_view::npos ? in : in.substr(0, nl);
  const std::string_view body = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
  faultline::ClickHouseRequestSql req(target, false);
  (void)req.feed(body.substr(0, body.size() / 2));
  (void)req.feed(body.substr(body.size() / 2));
  check(req.facts(true));
  check(req.facts(false));
  return 0;
}
