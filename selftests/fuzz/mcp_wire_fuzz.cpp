// libFuzzer target: what an agent or an MCP server writes to faultctl
// mcp-guard, any bytes at all: split into lines (whole, and in small pieces,
// which must give the same lines), each classified as JSON-RPC, and what
// parses written canonically (RFC 8785) and hashed as a tool would be.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "userspace/guard/json_canonical.h"
#include "userspace/guard/mcp_wire.h"

namespace {

std::vector<faultline::McpLineReader::Line> lines_of(std::string_view in, size_t piece) {
  faultline::McpLineReader reader(4096);  // small, so the oversized path is reached
  std::vector<faultline::McpLineReader::Line> out;
  for (size_t at = 0; at < in.size(); at += piece)
    for (auto& l : reader.feed(in.substr(at, piece))) out.push_back(std::move(l));
  if (auto last = reader.finish()) out.push_back(std::move(*last));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto whole = lines_of(in, in.size() + 1);
  const auto pieces = lines_of(in, 7);
  if (whole.size() != pieces.size()) __builtin_trap();
  for (size_t i = 0; i < whole.size(); ++i)
    if (whole[i].text != pieces[i].text || whole[i].oversized != pieces[i].oversized) __builtin_trap();
  for (const auto& l : whole) {
    if (l.oversized) {
      if (!l.text.empty()) __builtin_trap();
      continue;
    }
    if (l.text.size() > 4096 || l.text.find('\n') != std::string::npos) __builtin_trap();
    const faultline::McpMessage m = faultline::parse_mcp_message(l.text);
    if ((m.kind == faultline::McpMessage::Kind::NotJson || m.kind == faultline::McpMessage::Kind::Invalid) &&
        m.problem.empty())
      __builtin_trap();
    if (m.kind == faultline::McpMessage::Kind::Request && m.method.empty()) __builtin_trap();
    if (m.kind != faultline::McpMessage::Kind::NotJson) {
      const std::string c = faultline::canonical_json(m.doc);
      // Canonical text is JSON that reads back to itself.
      if (!c.empty() && faultline::canonical_json(nlohmann::json::parse(c)) != c) __builtin_trap();
    }
  }
  return 0;
}
