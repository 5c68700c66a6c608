// The verifier's statistics per program: asked for with log level
// BPF_LOG_STATS (a few lines, never the instruction trace), read back after load.
#include "loader/verifier_cost.h"

#include <bpf/bpf.h>

#include <cstdlib>
#include <cstring>

namespace faultline {
namespace {

constexpr uint32_t kLogStats = 4;  // BPF_LOG_STATS
constexpr size_t kLogBytes = 4096;

thread_local VerifierCostRecorder* active_recorder = nullptr;

// The number after `key` in the verifier's statistics ("processed 5957 insns",
// "verification time 812 usec"), or 0.
uint64_t stat_after(const char* log, const char* key) {
  const char* at = std::strstr(log, key);
  return at == nullptr ? 0 : std::strtoull(at + std::strlen(key), nullptr, 10);
}

}  // namespace

VerifierCostRecorder::VerifierCostRecorder() { active_recorder = this; }
VerifierCostRecorder::~VerifierCostRecorder() {
  if (active_recorder == this) active_recorder = nullptr;
}

void VerifierCostRecorder::before_load(bpf_object* obj) {
  VerifierCostRecorder* r = active_recorder;
  if (r == nullptr || obj == nullptr) return;
  bpf_program* p = nullptr;
  bpf_object__for_each_program(p, obj) {
    if (!bpf_program__autoload(p)) continue;
    auto buf = std::make_unique<char[]>(kLogBytes);
    buf[0] = '\0';
    if (bpf_program__set_log_buf(p, buf.get(), kLogBytes) != 0) continue;
    (void)bpf_program__set_log_level(p, kLogStats);
    r->logs_.push_back(std::move(buf));
  }
}

void VerifierCostRecorder::after_load(bpf_object* obj, const std::string& object_name, int err) {
  VerifierCostRecorder* r = active_recorder;
  if (r == nullptr || obj == nullptr || err != 0) return;
  bpf_program* p = nullptr;
  bpf_object__for_each_program(p, obj) {
    const int fd = bpf_program__fd(p);
    if (fd < 0) continue;
    ProgramCost c{object_name, bpf_program__name(p)};
    bpf_prog_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0) c.verified_insns = info.verified_insns;
    size_t log_size = 0;
    if (const char* log = bpf_program__log_buf(p, &log_size); log != nullptr) {
      if (c.verified_insns == 0) c.verified_insns = stat_after(log, "processed ");
      c.verify_us = stat_after(log, "verification time ");
    }
    r->costs_.push_back(std::move(c));
  }
}

}  // namespace faultline
