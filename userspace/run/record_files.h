// The files of a record folder, shared by the writer (record.cpp) and the reader.
#pragma once

namespace faultline::record_files {

constexpr const char* kHypothesis = "hypothesis.json";
constexpr const char* kHypothesisSha = "hypothesis.sha256";
constexpr const char* kSamples = "samples.jsonl";
constexpr const char* kVerdict = "verdict.json";
constexpr const char* kVerdictSha = "verdict.sha256";

}  // namespace faultline::record_files
