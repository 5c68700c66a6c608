// --optimize-cache: tools sorted by name and cache_control breakpoints on a
// Messages request, its content untouched (llm_cache_optimizer.h).
#include "userspace/guard/llm_cache_optimizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace llm_cache_optimizer_detail {

using OrderedJson = nlohmann::ordered_json;

// Every cache_control member of the document, wherever it is (the API
// counts those of tools, system blocks and message content blocks alike).
size_t count_breakpoints(const OrderedJson& j) {
  size_t n = 0;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "cache_control" && !it.value().is_null()) ++n;
      n += count_breakpoints(it.value());
    }
  } else if (j.is_array()) {
    for (const auto& v : j) n += count_breakpoints(v);
  }
  return n;
}

bool has_breakpoint(const OrderedJson& block) {
  return block.is_object() && block.contains("cache_control") && !block["cache_control"].is_null();
}

OrderedJson ephemeral() { return OrderedJson{{"type", "ephemeral"}}; }

}  // namespace llm_cache_optimizer_detail

std::optional<CacheOptimizeMode> parse_cache_optimize_mode(std::string_view text) {
  if (text == "off") return CacheOptimizeMode::off;
  if (text == "monitor") return CacheOptimizeMode::monitor;
  if (text == "enforce") return CacheOptimizeMode::enforce;
  return std::nullopt;
}

std::string_view cache_optimize_mode_name(CacheOptimizeMode mode) {
  switch (mode) {
    case CacheOptimizeMode::off:
      return "off";
    case CacheOptimizeMode::monitor:
      return "monitor";
    case CacheOptimizeMode::enforce:
      return "enforce";
  }
  return "off";
}

CacheOptimization optimize_anthropic_cache(std::string_view body) {
  using namespace llm_cache_optimizer_detail;
  CacheOptimization out;
  OrderedJson doc = OrderedJson::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    out.skipped = "not a JSON object";
    return out;
  }
  size_t breakpoints = count_breakpoints(doc);

  // The tools first: in the API's cache order they come before the system
  // prompt, so their breakpoint is the one worth the most.
  if (auto t = doc.find("tools"); t != doc.end() && t->is_array() && !t->empty()) {
    OrderedJson& tools = *t;
    const bool named = std::all_of(tools.begin(), tools.end(), [](const OrderedJson& e) {
      return e.is_object() && e.contains("name") && e["name"].is_string();
    });
    if (!named) {
      out.skipped = "tools: an entry without a string name";
    } else {
      const auto by_name = [](const OrderedJson& a, const OrderedJson& b) {
        return a["name"].get_ref<const std::string&>() < b["name"].get_ref<const std::string&>();
      };
      if (!std::is_sorted(tools.begin(), tools.end(), by_name)) {
        std::stable_sort(tools.begin(), tools.end(), by_name);
        out.changes.emplace_back("tools ordered by name");
      }
      const bool any = std::any_of(tools.begin(), tools.end(), has_breakpoint);
      if (!any && breakpoints < kMaxCacheBreakpoints) {
        tools.back()["cache_control"] = ephemeral();
        ++breakpoints;
        out.changes.push_back("cache_control on the last tool (" + tools.back()["name"].get<std::string>() + ")");
      }
    }
  }

  if (auto s = doc.find("system"); s != doc.end() && breakpoints < kMaxCacheBreakpoints) {
    OrderedJson& system = *s;
    if (system.is_string() && !system.get_ref<const std::string&>().empty()) {
      // The same prompt as the one text block the string form stands for.
      system = OrderedJson::array(
          {OrderedJson{{"type", "text"}, {"text", system.get<std::string>()}, {"cache_control", ephemeral()}}});
      out.changes.emplace_back("cache_control on the system prompt's end");
    } else if (system.is_array() && !system.empty() && system.back().is_object() &&
               std::none_of(system.begin(), system.end(), has_breakpoint)) {
      system.back()["cache_control"] = ephemeral();
      out.changes.emplace_back("cache_control on the system prompt's end");
    }
  }

  if (!out.changes.empty()) out.body = doc.dump(-1, ' ', false, OrderedJson::error_handler_t::strict);
  return out;
}

}  // namespace faultline
