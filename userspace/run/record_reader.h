// Reading an experiment record back, and checking its fingerprints.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

// Reading a record back: for `faultctl report`.
struct RecordContents {
  std::string dir;
  nlohmann::json hypothesis;
  std::optional<nlohmann::json> verdict;  // absent while running, or if faultctl was killed
  std::vector<nlohmann::json> samples;
};
[[nodiscard]] Result<RecordContents> load_record(const std::string& dir);

// Recomputes every fingerprint: hypothesis.json against hypothesis.sha256 (written
// before the fault), and the samples and verdict against what the verdict and
// verdict.sha256 say. Lists each file that changed.
struct RecordCheck {
  bool intact = false;
  std::string hypothesis_sha256;
  std::vector<std::string> problems;
};
[[nodiscard]] RecordCheck verify_record(const std::string& dir);

}  // namespace faultline
