// Reading a record back, and checking its fingerprints: `faultctl report`.
#include "userspace/run/record_reader.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/files.h"
#include "userspace/run/record.h"
#include "userspace/run/record_files.h"

namespace faultline {

using namespace record_files;
namespace {

// "hex  file" (sha256sum's format, so `sha256sum -c` checks a record too).
std::string sha_from_line(const std::string& line) {
  auto sp = line.find(' ');
  return line.substr(0, sp);
}

}  // namespace

Result<RecordContents> load_record(const std::string& dir) {
  RecordContents c;
  c.dir = dir;
  auto h = read_text_file(dir + "/" + kHypothesis);
  if (!h) return make_error(ENOENT, dir + " is not an experiment record (no " + kHypothesis + ")");
  c.hypothesis = nlohmann::json::parse(*h, nullptr, false);
  if (c.hypothesis.is_discarded()) return make_error(EINVAL, dir + "/" + kHypothesis + " is not valid JSON");
  if (auto v = read_text_file(dir + "/" + kVerdict)) {
    auto j = nlohmann::json::parse(*v, nullptr, false);
    if (!j.is_discarded()) c.verdict = j;
  }
  if (auto s = read_text_file(dir + "/" + kSamples)) {
    std::istringstream in(*s);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded()) c.samples.push_back(j);
    }
  }
  return c;
}

RecordCheck verify_record(const std::string& dir) {
  RecordCheck r;
  auto h = read_text_file(dir + "/" + kHypothesis);
  auto hs = read_text_file(dir + "/" + kHypothesisSha);
  if (!h) {
    r.problems.push_back(std::string(kHypothesis) + " is missing: " + dir + " is not an experiment record");
    return r;
  }
  r.hypothesis_sha256 = sha256_hex(*h);
  if (!hs) {
    r.problems.push_back(std::string(kHypothesisSha) + " is missing: the fingerprint cannot be checked");
  } else if (sha_from_line(*hs) != r.hypothesis_sha256) {
    r.problems.push_back(std::string(kHypothesis) + " was changed after it was fingerprinted (sha256 now " +
                         r.hypothesis_sha256.substr(0, 16) + "..., recorded " + sha_from_line(*hs).substr(0, 16) +
                         "...)");
  }
  auto v = read_text_file(dir + "/" + kVerdict);
  if (v) {
    auto j = nlohmann::json::parse(*v, nullptr, false);
    auto vs = read_text_file(dir + "/" + kVerdictSha);
    if (!vs || sha_from_line(*vs) != sha256_hex(*v)) {
      r.problems.push_back(std::string(kVerdict) + " was changed after it was written (or " + kVerdictSha +
                           " is missing)");
    }
    if (!j.is_discarded()) {
      if (hs && j.value("hypothesis_sha256", "") != sha_from_line(*hs))
        r.problems.push_back(std::string(kHypothesisSha) +
                             " does not match the fingerprint the verdict was written against");
      auto s = read_text_file(dir + "/" + kSamples);
      if (j.value("samples_sha256", "") != sha256_hex(s ? *s : ""))
        r.problems.push_back(std::string(kSamples) + " was changed after the verdict was written");
    }
  }
  r.intact = r.problems.empty();
  return r;
}

}  // namespace faultline
