// --optimize-cache: an Anthropic Messages request made cache-friendly without
// altering what it says: its tools in a deterministic order (by name), and
// prompt-cache breakpoints (cache_control) at the end of the tools and of the
// system prompt, within the API's limit of 4 per request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

// off: nothing; monitor: the changes are logged, the body goes as it came;
// enforce: the body goes with them.
enum class CacheOptimizeMode : uint8_t { off, monitor, enforce };

// "off", "monitor" or "enforce"; nullopt for anything else.
[[nodiscard]] std::optional<CacheOptimizeMode> parse_cache_optimize_mode(std::string_view text);
[[nodiscard]] std::string_view cache_optimize_mode_name(CacheOptimizeMode mode);

// The Messages API takes at most this many cache_control breakpoints.
inline constexpr size_t kMaxCacheBreakpoints = 4;

struct CacheOptimization {
  // What would change, in words ("tools ordered by name", "cache_control on
  // the last tool (read_file)", "cache_control on the system prompt's end");
  // empty: the body is left as it is.
  std::vector<std::string> changes;
  std::string body;  // the rewritten body; empty when `changes` is
  // Why nothing was done to a body that is not a Messages request the
  // optimizer understands ("not a JSON object", "tools: an entry without a
  // string name"); "" otherwise.
  std::string skipped;
};

// The optimization of one Messages request body (the whole body, as the
// client sent it). Only these change:
//   - `tools`, when every entry is an object with a string `name`: stably
//     sorted by name (bytes), so the same set of tools is the same prefix
//     whatever order the agent listed them in;
//   - the last tool (after the sort) gets "cache_control":{"type":"ephemeral"}
//     when no tool has one;
//   - the system prompt's last block gets it when no system block has one (a
//     string `system` becomes the one text block that says the same);
// each breakpoint only while the body has fewer than 4 (those already in it,
// anywhere, counted). Every other member, and every text, stays as it was;
// the members' order is kept. A body that needs no change is not re-written.
[[nodiscard]] CacheOptimization optimize_anthropic_cache(std::string_view body);

}  // namespace faultline
