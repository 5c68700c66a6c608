// Tool pins in one JSON file: read, changed and replaced under an flock.
#include "userspace/guard/mcp_pins.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/sha256.h"
#include "base/unique_fd.h"
#include "userspace/guard/activity_log.h"
#include "userspace/guard/json_canonical.h"

namespace faultline {
namespace mcp_pins_detail {

// The file's lock: FILE.lock, held for one read-change-write.
Result<UniqueFd> lock_pins(const std::string& file) {
  std::error_code ec;
  const auto dir = std::filesystem::path(file).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ec.value(), dir.string() + ": " + ec.message());
  UniqueFd fd(::open((file + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd) return errno_error("cannot open " + file + ".lock");
  while (::flock(fd.get(), LOCK_EX) != 0)
    if (errno != EINTR) return errno_error("cannot lock " + file + ".lock");
  return fd;
}

Result<std::map<std::string, ServerPins>> read_pins(const std::string& file) {
  std::map<std::string, ServerPins> out;
  if (::access(file.c_str(), F_OK) != 0) return out;
  auto text = read_text_file(file);
  if (!text) return text.error();
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  auto bad = [&](const std::string& why) { return make_error(EINVAL, file + ": " + why + " (fix or remove it)"); };
  if (j.is_discarded() || !j.is_object() || !j.contains("servers") || !j["servers"].is_object())
    return bad("not a pins file ({\"servers\": {...}})");
  for (const auto& [server, s] : j["servers"].items()) {
    if (!s.is_object() || !s.contains("tools") || !s["tools"].is_object())
      return bad("servers." + server + ": no tools");
    ServerPins sp;
    for (const auto& [tool, t] : s["tools"].items()) {
      if (!t.is_object()) return bad("servers." + server + ".tools." + tool + ": not an object");
      ToolPin p;
      p.hash = t.value("hash", "");
      p.since = t.value("since", "");
      p.pending = t.value("pending", "");
      sp.tools.emplace(tool, std::move(p));
    }
    out.emplace(server, std::move(sp));
  }
  return out;
}

Status write_pins(const std::string& file, const std::map<std::string, ServerPins>& pins) {
  nlohmann::json servers = nlohmann::json::object();
  for (const auto& [server, sp] : pins) {
    nlohmann::json tools = nlohmann::json::object();
    for (const auto& [tool, p] : sp.tools) {
      nlohmann::json t = {{"hash", p.hash}, {"since", p.since}};
      if (!p.pending.empty()) t["pending"] = p.pending;
      tools[tool] = std::move(t);
    }
    servers[server] = {{"tools", std::move(tools)}};
  }
  const std::string text =
      nlohmann::json{{"servers", servers}}.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return write_file_atomic(file, text);
}

}  // namespace mcp_pins_detail

using namespace mcp_pins_detail;

std::string mcp_tool_hash(const nlohmann::json& tool) { return sha256_hex(canonical_json(tool)); }

std::string_view pin_state_name(PinState s) {
  switch (s) {
    case PinState::Pinned:
      return "pinned";
    case PinState::FirstSight:
      return "first_sight";
    case PinState::Changed:
      return "changed";
    case PinState::New:
      return "new";
  }
  return "changed";
}

std::string mcp_pins_file(const std::string& state_dir) { return state_dir + "/mcp-pins.json"; }

Result<std::map<std::string, PinState>> McpPinStore::check(
    const std::string& server, const std::vector<std::pair<std::string, std::string>>& tools) {
  auto lock = lock_pins(file_);
  if (!lock) return lock.error();
  auto pins = read_pins(file_);
  if (!pins) return pins.error();
  std::map<std::string, PinState> out;
  const std::string now = activity_timestamp_now();
  auto it = pins->find(server);
  // A server with no tool pinned (a list that was empty) is still at its first sight.
  const bool first = it == pins->end() || std::none_of(it->second.tools.begin(), it->second.tools.end(),
                                                       [](const auto& t) { return !t.second.hash.empty(); });
  ServerPins& sp = (*pins)[server];
  bool changed = false;
  for (const auto& [name, hash] : tools) {
    ToolPin& p = sp.tools[name];
    if (first) {
      p = ToolPin{hash, now, ""};
      out[name] = PinState::FirstSight;
      changed = true;
    } else if (p.hash == hash) {
      out[name] = PinState::Pinned;
    } else {
      out[name] = p.hash.empty() ? PinState::New : PinState::Changed;
      if (p.pending != hash) {
        p.pending = hash;
        if (p.hash.empty()) p.since = now;
        changed = true;
      }
    }
  }
  if (changed) FL_TRY(write_pins(file_, *pins));
  return out;
}

Result<std::map<std::string, ServerPins>> McpPinStore::list() const { return read_pins(file_); }

Result<std::vector<std::string>> McpPinStore::accept(const std::string& server, const std::string& tool) {
  auto lock = lock_pins(file_);
  if (!lock) return lock.error();
  auto pins = read_pins(file_);
  if (!pins) return pins.error();
  auto it = pins->find(server);
  if (it == pins->end()) return input_error(ENOENT, "no pins for server '" + server + "'");
  std::vector<std::string> accepted;
  for (auto& [name, p] : it->second.tools) {
    if (!tool.empty() && name != tool) continue;
    if (p.pending.empty()) continue;
    p.hash = std::exchange(p.pending, std::string());
    p.since = activity_timestamp_now();
    accepted.push_back(name);
  }
  if (accepted.empty())
    return input_error(ENOENT, tool.empty() ? "server '" + server + "' has no changed or new tool to accept"
                                            : "server '" + server + "' has no changed or new tool '" + tool + "'");
  FL_TRY(write_pins(file_, *pins));
  return accepted;
}

Status McpPinStore::reset(const std::string& server) {
  auto lock = lock_pins(file_);
  if (!lock) return lock.error();
  auto pins = read_pins(file_);
  if (!pins) return pins.error();
  if (pins->erase(server) == 0) return input_error(ENOENT, "no pins for server '" + server + "'");
  return write_pins(file_, *pins);
}

}  // namespace faultline
