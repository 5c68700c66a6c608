// libFuzzer target: what an agent or an MCP server writes to faultctl
// mcp-guard, any bytes at all: split into lines (whole, and in small pieces,
// which must give the same lines), each classified as JSON-RPC, and what
// parses written canonically (RFC 8785) and hashed as a tool would be. The
// same bytes as a remote server's event stream (mcp-guard --upstream-url):
// whole and in pieces the same events, none over the bound.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "userspace/guard/json_canonical.h"
#include "userspace/guard/mcp_wire.h"
#include "userspace/net/sse_parser.h"

namespace {

std::vector<faultline::McpLineReader::Line> lines_of(std::string_view in, size_t piece) {
  faultline::McpLineReader reader(4096);  // small, so the oversized path is reached
  std::vector<faultline::McpLineReader::Line> out;
  for (size_t at = 0; at < in.size(); at += piece)
    for (auto& l : reader.feed(in.substr(at, piece))) out.push_back(std::move(l));
  if (auto last = reader.finish()) out.push_back(std::move(*last));
  return out;
}

std::vector<faultline::SseEvent> events_of(std::string_view in, size_t piece, size_t* oversized) {
  faultline::SseParser parser(4096);
  std::vector<faultline::SseEvent> out;
  for (size_t at = 0; at < in.size(); at += piece)
    for (auto& e : parser.feed(in.substr(at, piece))) out.push_back(std::move(e));
  *oversized = parser.oversized();
  return out;
}

void check_events(std::string_view in) {
  size_t over_whole = 0, over_pieces = 0;
  const auto whole = events_of(in, in.size() + 1, &over_whole);
  const auto pieces = events_of(in, 5, &over_pieces);
  if (whole.size() != pieces.size() || over_whole != over_pieces) __builtin_trap();
  for (size_t i = 0; i < whole.size(); ++i) {
    if (whole[i].data != pieces[i].data || whole[i].type != pieces[i].type || whole[i].id != pieces[i].id)
      __builtin_trap();
    if (whole[i].data.size() > 4096 || whole[i].type.empty()) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  check_events(in);
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
