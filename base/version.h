// Faultline's version, one string for faultctl, faultd and faultcp: the
// CMake project version, and `git describe` of the tree it was built from when
// that was a git checkout ("0.1.0 (git v0.1.0-12-g3b6d196-dirty)").
#pragma once

namespace faultline {

[[nodiscard]] const char* version_string();

}  // namespace faultline
