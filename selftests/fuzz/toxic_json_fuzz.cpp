// libFuzzer target: a toxic from a Toxiproxy API body (any client may send
// one), its update, and its plan. What is accepted must show as it reads back
// and fold into a plan without any overflow of the relay's clocks.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "userspace/proxy/toxic.h"
#include "userspace/proxy/toxic_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto body = nlohmann::json::parse(data, data + size, nullptr, false);
  if (body.is_discarded()) return 0;
  auto t = faultline::toxic_from_json(body);
  if (!t.ok()) return 0;
  if (!faultline::validate_toxic(*t).ok()) __builtin_trap();  // accepted, so valid
  if (faultline::first_n_of(t->attributes) < 0) __builtin_trap();
  auto again = faultline::toxic_from_json(faultline::toxic_to_json(*t));
  if (!again.ok() || faultline::toxic_to_json(*again) != faultline::toxic_to_json(*t)) __builtin_trap();
  (void)faultline::toxic_merged(*t, body);

  faultline::ToxicSet set;
  set.toxics.push_back(faultline::ToxicEntry{*t, 1, 1, std::make_shared<std::atomic<uint64_t>>(0), 0});
  for (auto stream : {faultline::Stream::upstream, faultline::Stream::downstream}) {
    auto plan = faultline::plan_direction(set, stream, 42, {}, 1);
    if (plan.deadline_ms < 0 || plan.deadline_ms > faultline::kToxicMaxMs) __builtin_trap();
    if (plan.open_delay_ms < 0 || plan.open_delay_ms > faultline::kToxicMaxMs) __builtin_trap();
    if (plan.latency_ms < 0 || plan.latency_ms > faultline::kToxicMaxMs) __builtin_trap();
  }
  return 0;
}
