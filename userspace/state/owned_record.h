// What every record in the state folder holds about itself: which fault or guard
// it is, and which process owns it. The resource store and the session registry
// build their records on this core, so status, abort and the reapers read both
// the same way.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "base/process.h"

namespace faultline {

struct OwnedRecord {
  std::string id;       // "r7", "s3", "g2": never reused
  std::string kind;     // the fault family ("syscall", "guard", "cpu", ...)
  std::string summary;  // one line for people
  std::string boot_id;  // a record from before a reboot refers to nothing alive
  ProcessIdentity owner;
  uint64_t expires_ns = 0;  // CLOCK_BOOTTIME; 0: none
  double created_wall = 0;

  // Writes the core fields into j (an object), and reads them back; read_core
  // throws nlohmann::json::exception on a field of the wrong type.
  void write_core(nlohmann::json& j) const;
  void read_core(const nlohmann::json& j);
};

[[nodiscard]] nlohmann::json identity_to_json(const ProcessIdentity& id);
[[nodiscard]] ProcessIdentity identity_from_json(const nlohmann::json& j);

}  // namespace faultline
