// MCP's stdio framing: bounded lines, JSON-RPC classification, the guard's answers.
#include "userspace/guard/mcp_wire.h"

namespace faultline {

void McpLineReader::push(std::vector<Line>& out, std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.find_first_not_of(" \t") == std::string_view::npos) return;
  out.push_back(Line{std::string(text), false});
}

std::vector<McpLineReader::Line> McpLineReader::feed(std::string_view bytes) {
  std::vector<Line> out;
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const std::string_view part = bytes.substr(0, nl);
    if (dropping_) {
      if (nl != std::string_view::npos) dropping_ = false;
    } else if (buf_.size() + part.size() > max_) {
      buf_.clear();
      out.push_back(Line{{}, true});
      dropping_ = nl == std::string_view::npos;
    } else if (nl == std::string_view::npos) {
      buf_.append(part);
    } else if (buf_.empty()) {
      push(out, part);
    } else {
      buf_.append(part);
      push(out, buf_);
      buf_.clear();
    }
    if (nl == std::string_view::npos) break;
    bytes.remove_prefix(nl + 1);
  }
  return out;
}

std::optional<McpLineReader::Line> McpLineReader::finish() {
  std::vector<Line> out;
  if (!dropping_ && !buf_.empty()) push(out, buf_);
  buf_.clear();
  dropping_ = false;
  if (out.empty()) return std::nullopt;
  return std::move(out.front());
}

McpMessage parse_mcp_message(std::string_view line) {
  McpMessage m;
  try {
    m.doc = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    m.kind = McpMessage::Kind::NotJson;
    m.doc = nullptr;
    m.problem = "not JSON (at byte " + std::to_string(e.byte) + ")";
    return m;
  } catch (const nlohmann::json::exception&) {
    m.kind = McpMessage::Kind::NotJson;
    m.doc = nullptr;
    m.problem = "not JSON";
    return m;
  }
  auto invalid = [&](std::string why) {
    m.kind = McpMessage::Kind::Invalid;
    m.problem = std::move(why);
    return m;
  };
  if (m.doc.is_array()) return invalid("a batch (a JSON array): send one message per line");
  if (!m.doc.is_object()) return invalid("not a JSON object");
  auto jr = m.doc.find("jsonrpc");
  if (jr == m.doc.end() || *jr != "2.0") return invalid("no \"jsonrpc\": \"2.0\"");
  const auto id = m.doc.find("id");
  const bool has_id = id != m.doc.end() && !id->is_null();
  if (has_id && !id->is_string() && !id->is_number_integer() && !id->is_number_unsigned())
    return invalid("an id is a string or a whole number");
  if (has_id) m.id = *id;
  if (auto method = m.doc.find("method"); method != m.doc.end()) {
    if (!method->is_string() || method->get_ref<const std::string&>().empty())
      return invalid("\"method\" is not a name");
    m.method = method->get<std::string>();
    if (auto params = m.doc.find("params"); params != m.doc.end() && !params->is_object() && !params->is_array())
      return invalid("\"params\" is neither an object nor an array");
    m.kind = has_id ? McpMessage::Kind::Request : McpMessage::Kind::Notification;
    return m;
  }
  if (!has_id) {
    // An error about a message whose id could not be read has id null.
    if (id != m.doc.end() && m.doc.contains("error")) {
      m.kind = McpMessage::Kind::Response;
      return m;
    }
    return invalid("neither a method nor an id");
  }
  if (!m.doc.contains("result") && !m.doc.contains("error")) return invalid("a response without result or error");
  m.kind = McpMessage::Kind::Response;
  return m;
}

std::string jsonrpc_error_line(const nlohmann::json& id, int code, std::string_view message) {
  nlohmann::json j = {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string tool_result_line(const nlohmann::json& id, std::string_view text, bool is_error) {
  nlohmann::json j = {{"jsonrpc", "2.0"},
                      {"id", id},
                      {"result", {{"content", {{{"type", "text"}, {"text", text}}}}, {"isError", is_error}}}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace faultline
