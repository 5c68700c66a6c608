// A submitted spec is read by the typed experiment's own reader
// (userspace/ops/experiment.h), the one faultd's agent runs it with and
// `faultctl run --control-plane` writes it for, so the three refuse the same
// values with the same words.
#include "cp/api/experiment_spec.h"

#include "userspace/faults/spec_fields.h"
#include "userspace/ops/experiment.h"

namespace faultline::cp {

std::optional<ApiError> check_experiment_spec(const nlohmann::json& spec) {
  auto read = experiment_from_json(spec, "");
  if (read) return std::nullopt;
  const std::string& message = read.error().message;
  const std::string field = spec_error_field(read.error());
  if (field.empty()) return ApiError{400, "spec", message};
  // "spec.delay_ms (--delay): why": the field, its flag, why.
  const std::string head = message.substr(0, message.find(": "));
  ApiError e{400, field, message.substr(head.size() + 2)};
  if (head.size() > field.size() + 3) e.flag = head.substr(field.size() + 2, head.size() - field.size() - 3);
  return e;
}

}  // namespace faultline::cp
