// The key, the recording's file format and the folder of --replay: plain data
// and files, no proxy knowledge (the judge decides when to record or replay).
#include "userspace/guard/llm_replay.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <nlohmann/json.hpp>

#include "base/files.h"
#include "base/sha256.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace llm_replay_detail {

// As nlohmann's strict dump takes it (so the file always writes).
bool valid_utf8(std::string_view s) {
  try {
    (void)nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

std::string to_hex(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  }
  return out;
}

std::optional<std::string> from_hex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); i += 2) {
    const int hi = nibble(s[i]), lo = nibble(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

std::string replay_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The value of header `name` (lower case) in a lower-cased head, trimmed.
std::optional<std::string> header_value(const std::string& head, std::string_view name) {
  const std::string needle = "\r\n" + std::string(name) + ":";
  const size_t at = head.find(needle);
  if (at == std::string::npos) return std::nullopt;
  size_t b = at + needle.size();
  size_t e = head.find("\r\n", b);
  if (e == std::string::npos) e = head.size();
  while (b < e && (head[b] == ' ' || head[b] == '\t')) ++b;
  while (e > b && (head[e - 1] == ' ' || head[e - 1] == '\t')) --e;
  return head.substr(b, e - b);
}

}  // namespace llm_replay_detail

using namespace llm_replay_detail;

std::string llm_replay_key(std::string_view method, std::string_view target, std::string_view body) {
  std::string text = std::string(method) + "\n" + std::string(target) + "\n";
  // nlohmann::json keeps object keys in a std::map: dump() writes them sorted.
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded())
    text += body;
  else
    text += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return sha256_hex(text);
}

std::string ReplayRecording::bytes() const {
  std::string out;
  for (const ReplayChunk& c : chunks) out += c.bytes;
  return out;
}

bool replay_answer_complete(std::string_view raw) {
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string_view::npos) return false;
  const std::string head = replay_lower(raw.substr(0, end + 2));
  if (head.size() < 12 || head.compare(0, 5, "http/") != 0) return false;
  const size_t sp = head.find(' ');
  if (sp == std::string::npos || sp + 4 > head.size()) return false;
  const char d = head[sp + 1];
  if (d != '2' || !std::isdigit(static_cast<unsigned char>(head[sp + 2])) ||
      !std::isdigit(static_cast<unsigned char>(head[sp + 3])))
    return false;
  const std::string_view body = raw.substr(end + 4);
  if (auto te = header_value(head, "transfer-encoding"); te && te->find("chunked") != std::string::npos)
    return body.size() >= 5 && (body.substr(0, 3) == "0\r\n" || body.find("\r\n0\r\n") != std::string_view::npos) &&
           body.substr(body.size() - 4) == "\r\n\r\n";
  if (auto cl = header_value(head, "content-length")) {
    uint64_t n = 0;
    for (char c : *cl) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      n = n * 10 + uint64_t(c - '0');
    }
    return body.size() >= n;
  }
  return true;  // ended by the connection's close
}

std::string replay_recording_json(const ReplayRecording& r) {
  nlohmann::ordered_json j;
  j["key"] = r.key;
  j["method"] = r.method;
  j["target"] = r.target;
  j["chunks"] = nlohmann::ordered_json::array();
  for (const ReplayChunk& c : r.chunks) {
    nlohmann::ordered_json o;
    o["at_ms"] = c.at_ms;
    if (valid_utf8(c.bytes))
      o["text"] = c.bytes;
    else
      o["hex"] = to_hex(c.bytes);
    j["chunks"].push_back(std::move(o));
  }
  return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::strict) + "\n";
}

Result<ReplayRecording> parse_replay_recording(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto bad_file = [](const std::string& why) { return make_error(EINVAL, "not a replay recording: " + why); };
  if (!j.is_object() || !j.contains("chunks") || !j["chunks"].is_array()) return bad_file("no chunks array");
  ReplayRecording r;
  if (j.contains("key") && j["key"].is_string()) r.key = j["key"].get<std::string>();
  if (j.contains("method") && j["method"].is_string()) r.method = j["method"].get<std::string>();
  if (j.contains("target") && j["target"].is_string()) r.target = j["target"].get<std::string>();
  for (const auto& c : j["chunks"]) {
    if (!c.is_object() || !c.contains("at_ms") || !c["at_ms"].is_number_unsigned())
      return bad_file("a chunk without at_ms");
    ReplayChunk chunk;
    chunk.at_ms = c["at_ms"].get<uint64_t>();
    if (c.contains("text") && c["text"].is_string()) {
      chunk.bytes = c["text"].get<std::string>();
    } else if (c.contains("hex") && c["hex"].is_string()) {
      auto b = from_hex(c["hex"].get<std::string>());
      if (!b) return bad_file("a chunk's hex is not hex");
      chunk.bytes = std::move(*b);
    } else {
      return bad_file("a chunk without text or hex");
    }
    r.chunks.push_back(std::move(chunk));
  }
  if (!replay_answer_complete(r.bytes())) return bad_file("its answer is not a whole 2xx response");
  return r;
}

std::string ReplayStore::path_for(std::string_view key) const {
  if (memory_only()) return "the cache (" + std::string(key.substr(0, 12)) + ")";
  return dir_ + "/" + std::string(key) + ".json";
}

Result<std::optional<ReplayRecording>> ReplayStore::find(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    if (auto it = loaded_.find(key); it != loaded_.end()) {
      if (it->second.expires > std::chrono::steady_clock::now())
        return std::optional<ReplayRecording>(it->second.recording);
      loaded_.erase(it);
    }
  }
  if (memory_only()) return std::optional<ReplayRecording>();
  const std::string path = path_for(key);
  auto text = read_text_file(path);
  if (!text) {
    if (text.error().err == ENOENT) return std::optional<ReplayRecording>();
    return make_error(text.error().err, path + ": " + text.error().describe());
  }
  auto r = parse_replay_recording(*text);
  if (!r) return make_error(r.error().err, path + ": " + r.error().message);
  std::lock_guard lock(mu_);
  loaded_[key] = Kept{*r, std::chrono::steady_clock::time_point::max()};
  return std::optional<ReplayRecording>(std::move(*r));
}

Status ReplayStore::save(ReplayRecording r) {
  const auto now = std::chrono::steady_clock::now();
  if (memory_only()) {
    std::lock_guard lock(mu_);
    std::erase_if(loaded_, [&](const auto& kv) { return kv.second.expires <= now; });
    if (loaded_.size() >= kMaxCached && !loaded_.contains(r.key)) {
      auto first = std::min_element(loaded_.begin(), loaded_.end(),
                                    [](const auto& a, const auto& b) { return a.second.expires < b.second.expires; });
      loaded_.erase(first);
    }
    std::string key = r.key;
    loaded_[key] = Kept{std::move(r), now + ttl_};
    return {};
  }
  const std::string path = path_for(r.key);
  if (auto st = write_file_atomic(path, replay_recording_json(r)); !st)
    return make_error(st.error().err, path + ": " + st.error().describe());
  std::lock_guard lock(mu_);
  std::string key = r.key;
  loaded_[key] = Kept{std::move(r), std::chrono::steady_clock::time_point::max()};
  return {};
}

std::string normalise_prompt(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool space = true;  // no leading space
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80 && !std::isalnum(c)) {
      if (!space) out += ' ';
      space = true;
      continue;
    }
    out += c < 0x80 ? static_cast<char>(std::tolower(c)) : ch;
    space = false;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

PromptProfile prompt_profile(std::string_view normalised) {
  PromptProfile p;
  const std::string padded = " " + std::string(normalised) + " ";
  for (size_t i = 0; i + 3 <= padded.size(); ++i) ++p.grams[padded.substr(i, 3)];
  double sum = 0;
  for (const auto& [g, n] : p.grams) sum += double(n) * double(n);
  p.norm = std::sqrt(sum);
  return p;
}

double prompt_similarity(const PromptProfile& a, const PromptProfile& b) {
  if (a.norm == 0 || b.norm == 0) return 0;
  const PromptProfile& small = a.grams.size() <= b.grams.size() ? a : b;
  const PromptProfile& large = &small == &a ? b : a;
  double dot = 0;
  for (const auto& [g, n] : small.grams)
    if (auto it = large.grams.find(g); it != large.grams.end()) dot += double(n) * double(it->second);
  return dot / (a.norm * b.norm);
}

namespace {

constexpr std::array<std::string_view, 5> kPromptFields = {"system", "messages", "input", "prompt", "instructions"};

void collect_strings(const nlohmann::json& v, std::string& out) {
  if (v.is_string()) {
    if (!out.empty()) out += '\n';
    out += v.get<std::string>();
  } else if (v.is_array() || v.is_object()) {
    for (const auto& item : v) collect_strings(item, out);
  }
}

}  // namespace

std::optional<SimilarityInput> llm_similarity_input(std::string_view method, std::string_view target,
                                                    std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  std::string prompt;
  for (const std::string_view field : kPromptFields) {
    auto it = j.find(std::string(field));
    if (it == j.end()) continue;
    collect_strings(*it, prompt);
    j.erase(it);
  }
  const std::string normalised = normalise_prompt(prompt);
  if (normalised.empty()) return std::nullopt;
  SimilarityInput in;
  in.scope = std::string(method) + "\n" + std::string(target) + "\n" +
             j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  in.profile = prompt_profile(normalised);
  return in;
}

std::optional<ReplayStore::SimilarHit> ReplayStore::find_similar(const SimilarityInput& in) {
  if (!similar_threshold_) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  const Kept* best = nullptr;
  double best_score = 0;
  // At most kMaxCached answers: a scan of them is a few ms at worst.
  for (const auto& [key, kept] : loaded_) {
    if (kept.expires <= now || !kept.recording.similar || kept.recording.similar->scope != in.scope) continue;
    const double score = prompt_similarity(kept.recording.similar->profile, in.profile);
    if (score >= *similar_threshold_ && score > best_score) {
      best = &kept;
      best_score = score;
    }
  }
  if (best == nullptr) return std::nullopt;
  return SimilarHit{best->recording, best_score};
}

bool replay_is_event_stream(const ReplayRecording& r) {
  std::string head;
  for (const ReplayChunk& c : r.chunks) {
    head += c.bytes;
    if (const size_t end = head.find("\r\n\r\n"); end != std::string::npos) {
      head.resize(end);
      break;
    }
  }
  for (char& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const size_t at = head.find("\r\ncontent-type:");
  if (at == std::string::npos) return false;
  const size_t eol = head.find("\r\n", at + 2);
  return head.substr(at, eol == std::string::npos ? std::string::npos : eol - at).find("text/event-stream") !=
         std::string::npos;
}

}  // namespace faultline
