// libFuzzer target: the DLP engine's streaming scan (any request bytes, from
// any client). The first two bytes seed the chunking: the findings and the
// redacted bytes must not depend on where the stream is split, the redaction
// keeps the length, and the scan's window stays bounded.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "userspace/guard/dlp_engine.h"

namespace {

struct DlpSplitter {
  uint32_t x;
  size_t next() {
    x = x * 1103515245u + 12345u;
    const uint32_t r = x >> 16;
    return (r & 7) == 0 ? 1 + (r % 4096) : 1 + (r % 8);
  }
};

void dlp_check(bool ok) {
  if (!ok) __builtin_trap();
}

const std::shared_ptr<const faultline::DlpEngine>& dlp_engine() {
  static const std::shared_ptr<const faultline::DlpEngine> e = [] {
    faultline::DlpEngine::Options o;
    o.types = faultline::all_dlp_types();
    o.content = {{"codename", "bluebird", false, "fuzz", 1}, {"ticket", "FIN-[0-9]{4}", true, "fuzz", 2}};
    auto built = faultline::DlpEngine::build(o);
    if (!built) __builtin_trap();
    return *built;
  }();
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t seed = data[0] | (uint32_t{data[1]} << 8);
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  const auto whole = faultline::dlp_scan(dlp_engine(), body);

  faultline::DlpStream split(dlp_engine());
  faultline::DlpRedactor redactor(dlp_engine());
  std::string redacted;
  DlpSplitter s{seed};
  for (size_t at = 0; at < body.size();) {
    const size_t n = std::min(s.next(), body.size() - at);
    split.feed(body.substr(at, n));
    redacted += redactor.feed(body.substr(at, n));
    dlp_check(split.held_bytes() <= faultline::kDlpLookahead + faultline::kDlpLookbehind + 4096 + 16);
    at += n;
  }
  split.finish();
  redacted += redactor.finish();
  dlp_check(split.findings() == whole);
  dlp_check(redactor.findings() == whole);
  dlp_check(redacted.size() == body.size());
  for (const auto& f : whole) {
    dlp_check(f.begin <= f.end && f.end <= body.size());
    if (f.type)
      for (uint64_t i = f.begin; i < f.end; ++i) dlp_check(redacted[i] == '*');
  }
  return 0;
}
