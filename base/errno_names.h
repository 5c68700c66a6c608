// errno names an operator may write (EIO, ECONNREFUSED, ...) and back.
#pragma once

#include <optional>
#include <string>

namespace faultline {

[[nodiscard]] std::optional<int> errno_from_name(const std::string& name);
[[nodiscard]] std::string errno_name(int err);

}  // namespace faultline
