// libFuzzer target: chaosd's attack JSON as faultctl apply -f reads it
// (userspace/ops/chaos_mesh_import.h). Every refusal names where and why; a
// document read without errors is a typed experiment.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "userspace/ops/chaos_mesh_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  faultline::ChaosMeshImportOptions o;
  o.resolve_names = false;  // no DNS from a fuzz target
  (void)faultline::looks_like_chaosd_attack(in);
  faultline::ChaosMeshImport c = faultline::import_chaosd_attack(in, o);
  for (const auto& e : c.errors)
    if (e.reason.empty() || e.path.empty() || e.mark.line < 1 || e.mark.column < 1) __builtin_trap();
  if (c.ok() != c.experiment.has_value()) __builtin_trap();
  return 0;
}
