// The dashboard's files (cp/dashboard/*.html, *.js, *.css), compiled into
// faultcp by cp/dashboard/embed.cmake: served from memory, never from disk.
#pragma once

#include <string_view>
#include <vector>

namespace faultline::cp {

struct DashboardAsset {
  std::string_view name;  // "app.js"
  std::string_view content_type;
  std::string_view body;
};

[[nodiscard]] const std::vector<DashboardAsset>& dashboard_assets();

}  // namespace faultline::cp
