// MCP's stdio transport as the MCP guard reads it: newline-delimited
// JSON-RPC 2.0 messages, each line at most kMcpMaxLine bytes, classified into
// requests, notifications and responses; and the JSON-RPC answers the guard
// writes itself.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

// A line longer than this (10 MiB) is refused: its bytes are dropped up to
// its newline, and the reader goes on with the next line.
inline constexpr size_t kMcpMaxLine = 10 * 1024 * 1024;

// Splits a byte stream into lines. A line's "\r\n" counts as its end; an
// empty line (or one of spaces) is skipped, as MCP's own readers do.
class McpLineReader {
 public:
  struct Line {
    std::string text;        // without its newline; empty when oversized
    bool oversized = false;  // a line over the limit was dropped (one event per line)
  };
  explicit McpLineReader(size_t max_line = kMcpMaxLine) : max_(max_line) {}
  // The lines the bytes complete.
  [[nodiscard]] std::vector<Line> feed(std::string_view bytes);
  // At the end of the stream: a last line without its newline, if any.
  [[nodiscard]] std::optional<Line> finish();

 private:
  void push(std::vector<Line>& out, std::string_view text);
  std::string buf_;
  bool dropping_ = false;  // inside an oversized line, until its newline
  size_t max_;
};

// One line as JSON-RPC 2.0.
struct McpMessage {
  enum class Kind : uint8_t {
    Request,       // method and id
    Notification,  // method, no id
    Response,      // id and result or error
    Invalid,       // JSON, not one JSON-RPC message (a batch, no jsonrpc "2.0", ...): problem says why
    NotJson,       // problem says where
  };
  Kind kind = Kind::NotJson;
  nlohmann::json doc;  // the parsed message (null for NotJson)
  std::string method;
  nlohmann::json id;  // the id as sent (a number or a string); null when none
  std::string problem;
};

[[nodiscard]] McpMessage parse_mcp_message(std::string_view line);

// A JSON-RPC error: {"jsonrpc":"2.0","id":ID,"error":{"code","message"}} as one line (no newline).
[[nodiscard]] std::string jsonrpc_error_line(const nlohmann::json& id, int code, std::string_view message);
// A tool result: {"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":TEXT}],"isError":E}}.
[[nodiscard]] std::string tool_result_line(const nlohmann::json& id, std::string_view text, bool is_error);

// JSON-RPC 2.0's error codes the guard answers with.
inline constexpr int kJsonRpcParseError = -32700;
inline constexpr int kJsonRpcInvalidRequest = -32600;
inline constexpr int kJsonRpcInvalidParams = -32602;

}  // namespace faultline
