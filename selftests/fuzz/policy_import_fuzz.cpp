// libFuzzer target: what faultctl reads besides policy files, all of it from
// other tools or other hands: Chaos Mesh documents (apply -f, and as faultcp reads them),
// guard --json-log lines and top --json samples (diff --simulate, suggest).
// Every refusal names where and why; what suggest prints is a valid policy.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/ops/chaos_mesh_import.h"
#include "userspace/policy/policy_diff.h"
#include "userspace/policy/policy_suggest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  faultline::ChaosMeshImport c = faultline::import_chaos_mesh(in, {"/fuzz", false});
  for (const auto& e : c.errors) {
    if (e.reason.empty() || e.path.empty() || e.mark.line < 1 || e.mark.column < 1) __builtin_trap();
  }
  if (c.ok() != c.experiment.has_value()) __builtin_trap();
  // As faultcp reads it (POST /v1/chaos-mesh): the selectors left to the caller.
  faultline::ChaosMeshImportOptions cp;
  cp.resolve_names = false;
  cp.selectors_by_caller = true;
  faultline::ChaosMeshImport by_cp = faultline::import_chaos_mesh(in, cp);
  for (const auto& e : by_cp.errors) {
    if (e.reason.empty() || e.path.empty() || e.mark.line < 1 || e.mark.column < 1) __builtin_trap();
  }
  if (by_cp.ok() && !by_cp.selector.has_value()) __builtin_trap();
  auto log = faultline::read_decision_log(in);
  if (!log.ok() && log.error().message.empty()) __builtin_trap();
  faultline::SuggestOptions o;
  auto s = faultline::suggest_policy({{"fuzz", std::string(in)}}, o);
  if (s.ok()) {
    faultline::PolicyParse back = faultline::parse_policy(faultline::suggestion_text(*s, {"fuzz"}));
    if (!back.ok()) __builtin_trap();
  }
  return 0;
}
