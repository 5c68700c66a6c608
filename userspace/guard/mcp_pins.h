// The MCP guard's tool pins: each tool's definition hash (SHA-256 of its RFC
// 8785 canonical JSON), pinned per server name on the server's first sight,
// in one JSON file shared by every mcp-guard of the user (locked while read
// and written). A changed or new tool is a finding until a person accepts it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/result.h"

namespace faultline {

// A tool's definition hash: lowercase hex SHA-256 of canonical_json(tool).
[[nodiscard]] std::string mcp_tool_hash(const nlohmann::json& tool);

enum class PinState : uint8_t {
  Pinned,      // as pinned
  FirstSight,  // the server had no pins: pinned now
  Changed,     // pinned with another hash (a rug pull)
  New,         // the server has pins, this tool is not among them
};
[[nodiscard]] std::string_view pin_state_name(PinState s);  // "pinned", "first_sight", "changed", "new"

struct ToolPin {
  std::string hash;
  std::string since;    // RFC 3339 UTC: pinned, or first seen as pending
  std::string pending;  // a hash seen since that differs (Changed, New): what `pins accept` pins
};

struct ServerPins {
  std::map<std::string, ToolPin> tools;  // by tool name; a tool with no hash yet is pending only
};

class McpPinStore {
 public:
  // The file (made with its folder, mode 0600, when first written).
  explicit McpPinStore(std::string file) : file_(std::move(file)) {}
  [[nodiscard]] const std::string& file() const { return file_; }

  // A server's listed tools (name, hash) against its pins; pins them all if
  // the server has none; records a differing hash as pending.
  [[nodiscard]] Result<std::map<std::string, PinState>> check(
      const std::string& server, const std::vector<std::pair<std::string, std::string>>& tools);
  [[nodiscard]] Result<std::map<std::string, ServerPins>> list() const;
  // Pins what is pending: one tool, or every pending tool of the server
  // (tool ""). Returns the tools accepted; ENOENT (bad input) when nothing is.
  [[nodiscard]] Result<std::vector<std::string>> accept(const std::string& server, const std::string& tool);
  // Forgets a server's pins (its next list is pinned afresh). ENOENT when it has none.
  [[nodiscard]] Status reset(const std::string& server);

 private:
  std::string file_;
};

// Where pins live: <state dir>/mcp-pins.json.
[[nodiscard]] std::string mcp_pins_file(const std::string& state_dir);

}  // namespace faultline
