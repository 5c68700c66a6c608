// --mirror: each LLM call's prompt is split along the API's trust boundary
// (system and user text against tool_result content) and the hosts each side
// names are remembered for the session; a write (POST, PUT, PATCH, or a query
// string carrying data) to a host named only by tool content is flagged: the
// agent may be doing what a fetched page told it, not what its user asked.
// No model is asked. docs/detectors.md, "Mirror".
#pragma once

#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "userspace/guard/dlp_validators.h"
#include "userspace/guard/prompt_guard.h"

namespace faultline {

// The hosts a text names: each URL's authority (scheme://host[:port], kept
// with its port when it has one), and bare names whose last label is a
// top-level domain of the public suffix list. Lower case; at most 256.
[[nodiscard]] std::vector<std::string> hosts_named_in(std::string_view text, const TldSet& tlds);

class MirrorWatch {
 public:
  [[nodiscard]] static Result<std::unique_ptr<MirrorWatch>> create();

  // One call's prompt: the hosts of its system and user texts are trusted,
  // those of its tool results learned from tools.
  void learn(const std::vector<PromptSegment>& segments);
  // A request: the host it writes to, when the session learned that host
  // only from tool content ("" when not flagged). `port` is the request's.
  [[nodiscard]] std::string judge(std::string_view method, std::string_view host, uint16_t port,
                                  std::string_view target) const;

 private:
  explicit MirrorWatch(TldSet tlds) : tlds_(std::move(tlds)) {}
  TldSet tlds_;
  mutable std::mutex mu_;
  std::set<std::string> trusted_, from_tools_;
};

}  // namespace faultline
