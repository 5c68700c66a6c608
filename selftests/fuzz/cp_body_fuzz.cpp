// libFuzzer target: how faultcp reads a request body it does not trust — the
// JSON object, its fields against a rule table, and an experiment spec with
// its caps. Every outcome is either a value or an error naming a field: no
// exception escapes, and an accepted spec has a kind, a target and a duration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cp/api/api_error.h"
#include "cp/api/experiment_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace faultline::cp;
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_body(body, size % 2 == 0);
  if (auto* err = std::get_if<ApiError>(&parsed)) {
    if (err->field.empty() || err->status != 400) std::abort();
    return 0;
  }
  const auto& j = std::get<nlohmann::json>(parsed);
  static const std::vector<FieldRule> rules = {
      {"agent_id", JsonType::Integer}, {"selector", JsonType::Object}, {"spec", JsonType::Object, true}};
  if (auto e = check_fields(j, rules)) {
    if (e->field.empty()) std::abort();
    return 0;
  }
  if (auto e = check_experiment_spec(j["spec"])) {
    if (e->field.rfind("spec.", 0) != 0) std::abort();
    return 0;
  }
  const auto& spec = j["spec"];
  if (!spec.contains("kind") || !spec.contains("target") || !spec.contains("duration_sec")) std::abort();
  return 0;
}
