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
  return ApiError{400, field, message.substr(field.size() + 2)};
}

}  // namespace faultline::cp
