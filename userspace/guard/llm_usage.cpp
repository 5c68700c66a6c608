// Usage from LLM responses: a hand-written HTTP/1.1 response framer (head,
// chunked or sized or close-delimited body) and SSE event reader, both
// incremental over bytes in any pieces; each SSE data payload (small) and a
// JSON answer are parsed with nlohmann.
#include "userspace/guard/llm_usage.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "userspace/guard/llm_framing.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace llm_usage_detail {

using Json = nlohmann::json;

using namespace llm_framing;

std::optional<uint64_t> count(const Json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  const auto it = o.find(key);
  if (it == o.end()) return std::nullopt;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return static_cast<uint64_t>(it->get<int64_t>());
  return std::nullopt;
}

const Json& member(const Json& o, const char* key) {
  static const Json kNull;
  if (!o.is_object()) return kNull;
  const auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

void set_if(uint64_t& field, std::optional<uint64_t> v) {
  if (v) field = *v;
}

// What the answers say, by provider shape.
class UsageState {
 public:
  explicit UsageState(LlmEndpoint endpoint) : endpoint_(endpoint) {}

  // One SSE event's JSON. True when it is OpenAI chat's usage-only chunk.
  bool event(std::string_view data) {
    if (endpoint_ == LlmEndpoint::OpenAIChat && trim(data) == "[DONE]") {
      ended_ = true;
      return false;
    }
    const Json j = Json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return false;
    const Json& type = member(j, "type");
    const std::string t = type.is_string() ? type.get<std::string>() : "";
    switch (endpoint_) {
      case LlmEndpoint::AnthropicMessages:
        if (t == "message_start") {
          take_model(member(j, "message"));
          anthropic(member(member(j, "message"), "usage"));
        } else if (t == "message_delta") {
          anthropic(member(j, "usage"));
        } else if (t == "message_stop") {
          ended_ = true;
        }
        return false;
      case LlmEndpoint::OpenAIChat: {
        take_model(j);
        const Json& u = member(j, "usage");
        if (!u.is_object()) return false;
        chat(u);
        const Json& choices = member(j, "choices");
        return choices.is_array() && choices.empty();
      }
      case LlmEndpoint::OpenAIResponses:
        if (t == "response.created" || t == "response.in_progress") {
          take_model(member(j, "response"));
        } else if (t == "response.completed" || t == "response.incomplete" || t == "response.failed") {
          take_model(member(j, "response"));
          responses(member(member(j, "response"), "usage"));
          ended_ = true;
        }
        return false;
      case LlmEndpoint::None:
        return false;
    }
    return false;
  }

  // A whole JSON answer.
  void body(std::string_view text) {
    const Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    take_model(j);
    const Json& u = member(j, "usage");
    if (endpoint_ == LlmEndpoint::AnthropicMessages)
      anthropic(u);
    else if (endpoint_ == LlmEndpoint::OpenAIChat)
      chat(u);
    else if (endpoint_ == LlmEndpoint::OpenAIResponses)
      responses(u);
    ended_ = true;
  }

  [[nodiscard]] std::optional<LlmUsage> usage() const { return seen_ ? std::optional<LlmUsage>(usage_) : std::nullopt; }
  [[nodiscard]] bool ended() const { return ended_; }

 private:
  void take_model(const Json& o) {
    const Json& m = member(o, "model");
    if (m.is_string()) usage_.model = m.get<std::string>();
  }
  // message_delta's usage is cumulative and may carry only output_tokens: a
  // field it names replaces the one before, the others stay.
  void anthropic(const Json& u) {
    if (!u.is_object()) return;
    seen_ = true;
    set_if(usage_.input, count(u, "input_tokens"));
    set_if(usage_.output, count(u, "output_tokens"));
    set_if(usage_.cache_read, count(u, "cache_read_input_tokens"));
    set_if(usage_.cache_creation, count(u, "cache_creation_input_tokens"));
  }
  void chat(const Json& u) {
    if (!u.is_object()) return;
    seen_ = true;
    set_if(usage_.input, count(u, "prompt_tokens"));
    set_if(usage_.output, count(u, "completion_tokens"));
    set_if(usage_.cache_read, count(member(u, "prompt_tokens_details"), "cached_tokens"));
    set_if(usage_.reasoning, count(member(u, "completion_tokens_details"), "reasoning_tokens"));
  }
  void responses(const Json& u) {
    if (!u.is_object()) return;
    seen_ = true;
    set_if(usage_.input, count(u, "input_tokens"));
    set_if(usage_.output, count(u, "output_tokens"));
    set_if(usage_.cache_read, count(member(u, "input_tokens_details"), "cached_tokens"));
    set_if(usage_.reasoning, count(member(u, "output_tokens_details"), "reasoning_tokens"));
  }

  LlmEndpoint endpoint_;
  LlmUsage usage_;
  bool seen_ = false;
  bool ended_ = false;
};

// The tool calls of an answer, by provider shape (--trace-tools).
class ToolCallState {
 public:
  explicit ToolCallState(LlmEndpoint endpoint) : endpoint_(endpoint) {}

  void event(std::string_view data) {
    const Json j = Json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    const Json& type = member(j, "type");
    const std::string t = type.is_string() ? type.get<std::string>() : "";
    switch (endpoint_) {
      case LlmEndpoint::AnthropicMessages: {
        const Json& index = member(j, "index");
        if (!index.is_number_unsigned()) return;
        const uint64_t i = index.get<uint64_t>();
        if (t == "content_block_start") {
          const Json& b = member(j, "content_block");
          if (member(b, "type") != "tool_use") return;
          if (open_.size() >= kMaxToolCalls && !open_.contains(i)) return;
          Open& o = open_[i];
          o.call = LlmToolCall{label(member(b, "id")), label(member(b, "name")), "", false};
          const Json& input = member(b, "input");
          if (input.is_object() && !input.empty()) append(o.call, input.dump());
          o.order = next_order_++;
        } else if (t == "content_block_delta") {
          auto it = open_.find(i);
          const Json& d = member(j, "delta");
          if (it != open_.end() && member(d, "type") == "input_json_delta")
            append(it->second.call, text(member(d, "partial_json")));
        } else if (t == "content_block_stop") {
          auto it = open_.find(i);
          if (it == open_.end()) return;
          if (it->second.call.arguments.empty()) it->second.call.arguments = "{}";
          done(std::move(it->second.call));
          open_.erase(it);
        }
        return;
      }
      case LlmEndpoint::OpenAIChat: {
        const Json& choices = member(j, "choices");
        if (!choices.is_array()) return;
        for (const Json& c : choices) {
          const Json& calls = member(member(c, "delta"), "tool_calls");
          if (!calls.is_array()) continue;
          const Json& ci = member(c, "index");
          const uint64_t choice = ci.is_number_unsigned() ? ci.get<uint64_t>() : 0;
          for (const Json& d : calls) {
            const Json& idx = member(d, "index");
            if (!idx.is_number_unsigned()) continue;
            const uint64_t key = (choice << 32) | (idx.get<uint64_t>() & 0xffffffffu);
            auto [it, fresh] = open_.try_emplace(key);
            if (fresh) it->second.order = next_order_++;
            if (open_.size() > kMaxToolCalls) {
              open_.erase(it);
              continue;
            }
            LlmToolCall& call = it->second.call;
            if (const Json& id = member(d, "id"); id.is_string()) call.id = label(id);
            const Json& f = member(d, "function");
            if (const Json& n = member(f, "name"); n.is_string())
              call.name = (call.name + label(n)).substr(0, kMaxToolLabel);
            append(call, text(member(f, "arguments")));
          }
        }
        return;
      }
      case LlmEndpoint::OpenAIResponses:
        if (t == "response.output_item.done") item(member(j, "item"));
        return;
      case LlmEndpoint::None:
        return;
    }
  }

  // A whole JSON answer.
  void body(std::string_view data) {
    const Json j = Json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    if (endpoint_ == LlmEndpoint::AnthropicMessages) {
      const Json& content = member(j, "content");
      if (!content.is_array()) return;
      for (const Json& b : content)
        if (member(b, "type") == "tool_use") {
          LlmToolCall call{label(member(b, "id")), label(member(b, "name")), "", false};
          const Json& input = member(b, "input");
          append(call, input.is_null() ? "{}" : input.dump());
          done(std::move(call));
        }
    } else if (endpoint_ == LlmEndpoint::OpenAIChat) {
      const Json& choices = member(j, "choices");
      if (!choices.is_array()) return;
      for (const Json& c : choices) {
        const Json& calls = member(member(c, "message"), "tool_calls");
        if (!calls.is_array()) continue;
        for (const Json& d : calls) {
          const Json& f = member(d, "function");
          LlmToolCall call{label(member(d, "id")), label(member(f, "name")), "", false};
          append(call, text(member(f, "arguments")));
          done(std::move(call));
        }
      }
    } else if (endpoint_ == LlmEndpoint::OpenAIResponses) {
      const Json& output = member(j, "output");
      if (output.is_array())
        for (const Json& o : output) item(o);
    }
  }

  // The stream ended: OpenAI chat's calls are whole now.
  void end() {
    std::vector<std::pair<uint64_t, LlmToolCall>> rest;
    for (auto& [key, o] : open_) rest.emplace_back(o.order, std::move(o.call));
    open_.clear();
    std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [order, call] : rest) done(std::move(call));
  }

  [[nodiscard]] const std::vector<LlmToolCall>& calls() const { return calls_; }

 private:
  struct Open {
    LlmToolCall call;
    uint64_t order = 0;
  };
  static std::string text(const Json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }
  // An id or a name: cut at kMaxToolLabel bytes.
  static std::string label(const Json& v) {
    if (!v.is_string()) return {};
    const auto& str = v.get_ref<const std::string&>();
    return str.substr(0, kMaxToolLabel);
  }
  static void append(LlmToolCall& call, std::string_view more) {
    const size_t room = kMaxToolArguments - std::min(kMaxToolArguments, call.arguments.size());
    if (more.size() > room) call.truncated = true;
    call.arguments.append(more.substr(0, room));
  }
  void item(const Json& it) {
    if (member(it, "type") != "function_call") return;
    LlmToolCall call{label(member(it, "call_id")), label(member(it, "name")), "", false};
    append(call, text(member(it, "arguments")));
    done(std::move(call));
  }
  void done(LlmToolCall call) {
    if (calls_.size() < kMaxToolCalls) calls_.push_back(std::move(call));
  }

  LlmEndpoint endpoint_;
  std::map<uint64_t, Open> open_;  // streamed calls not yet whole, by block / (choice, index)
  uint64_t next_order_ = 0;
  std::vector<LlmToolCall> calls_;
};

struct ReaderImpl : FramerSink, SseSink {
  ReaderImpl(LlmEndpoint endpoint, bool trace_tools) : framer(*this), sse(*this, false), state(endpoint) {
    if (trace_tools) tools.emplace(endpoint);
  }

  void on_head(const ResponseHead& h, std::string_view) override {
    head = h;
    if (h.status >= 100 && h.status < 200) return;
    if (!h.encoding.empty())
      problem = "a compressed body (Content-Encoding: " + h.encoding + ")";
    else if (h.status < 200 || h.status > 299)
      problem = "an error status";
    read = problem.empty();
  }
  void on_body(std::string_view data) override {
    if (!read) return;
    if (head.sse) {
      sse.feed(data);
    } else if (json.size() + data.size() <= kMaxJsonBody) {
      json.append(data);
    } else {
      read = false;
      problem = "a JSON answer larger than 16 MiB";
    }
  }
  void on_body_end() override {
    if (!read) return;
    if (head.sse) {
      sse.finish();
      if (tools) tools->end();
    } else {
      state.body(json);
      if (tools) tools->body(json);
    }
    json.clear();
  }
  bool on_event(std::string_view, std::string_view data, bool whole) override {
    if (whole) {
      (void)state.event(data);
      if (tools) tools->event(data);
    }
    return false;
  }

  ResponseFramer framer;
  SseReader sse;
  UsageState state;
  std::optional<ToolCallState> tools;
  ResponseHead head;
  bool read = false;
  std::string json;
  std::string problem;
};

}  // namespace llm_usage_detail

struct LlmUsageReader::Impl : llm_usage_detail::ReaderImpl {
  using ReaderImpl::ReaderImpl;
};

LlmUsageReader::LlmUsageReader(LlmEndpoint endpoint, bool trace_tools)
    : impl_(std::make_unique<Impl>(endpoint, trace_tools)) {}
LlmUsageReader::~LlmUsageReader() = default;

void LlmUsageReader::feed(std::string_view bytes) {
  (void)impl_->framer.feed(bytes);
  if (impl_->framer.bad() && impl_->problem.empty()) impl_->problem = impl_->framer.problem();
}

void LlmUsageReader::finish() { impl_->framer.finish(); }
std::optional<LlmUsage> LlmUsageReader::usage() const { return impl_->state.usage(); }
bool LlmUsageReader::ended() const { return impl_->state.ended(); }
int LlmUsageReader::status() const { return impl_->head.status; }
std::string_view LlmUsageReader::problem() const { return impl_->problem; }
std::vector<LlmToolCall> LlmUsageReader::tool_calls() const {
  return impl_->tools ? impl_->tools->calls() : std::vector<LlmToolCall>();
}

namespace llm_usage_detail {

struct FilterImpl : FramerSink, SseSink {
  FilterImpl() : framer(*this), sse(*this, true), state(LlmEndpoint::OpenAIChat) {}

  void on_head(const ResponseHead& h, std::string_view raw) override {
    out += raw;
    head = h;
    filter = h.sse && h.status >= 200 && h.status <= 299 && h.encoding.empty() && h.mode != BodyMode::length;
  }
  void on_body(std::string_view data) override {
    if (filter) {
      sse.feed(data);
      body += sse.take_out();
    } else {
      body += data;
    }
  }
  void on_body_end() override {
    if (filter) {
      sse.finish();
      body += sse.take_out();
    }
    flush_body();
    if (head.mode == BodyMode::chunked) out += "0\r\n\r\n";  // trailers are not kept
  }
  bool on_event(std::string_view, std::string_view data, bool whole) override {
    if (!whole) return false;
    const bool usage_chunk = state.event(data);
    if (usage_chunk) removed = true;
    return usage_chunk;
  }

  // The body bytes ready: as they are, or as one chunk.
  void flush_body() {
    if (body.empty()) return;
    if (head.mode == BodyMode::chunked) {
      char size[24];
      std::snprintf(size, sizeof(size), "%zx\r\n", body.size());
      out += size;
      out += body;
      out += "\r\n";
    } else {
      out += body;
    }
    body.clear();
  }

  ResponseFramer framer;
  SseReader sse;
  UsageState state;
  ResponseHead head;
  bool filter = false;
  bool removed = false;
  bool passthrough = false;  // the framing was bad: the rest goes as it came
  std::string body;
  std::string out;
};

}  // namespace llm_usage_detail

struct LlmStreamFilter::Impl : llm_usage_detail::FilterImpl {};

LlmStreamFilter::LlmStreamFilter() : impl_(std::make_unique<Impl>()) {}
LlmStreamFilter::~LlmStreamFilter() = default;

std::string LlmStreamFilter::feed(std::string_view bytes) {
  Impl& m = *impl_;
  if (m.passthrough) return std::string(bytes);
  const size_t used = m.framer.feed(bytes);
  m.flush_body();
  if (m.framer.bad()) {
    m.passthrough = true;
    m.out.append(bytes.substr(used));
  }
  return std::exchange(m.out, {});
}

std::string LlmStreamFilter::finish() {
  Impl& m = *impl_;
  if (m.passthrough) return {};
  m.framer.finish();
  if (!m.framer.done() && m.filter) {  // a cut: what the reader held goes out, no terminal chunk
    m.sse.finish();
    m.body += m.sse.take_out();
  }
  m.flush_body();
  return std::exchange(m.out, {});
}

std::optional<LlmUsage> LlmStreamFilter::usage() const { return impl_->state.usage(); }
bool LlmStreamFilter::removed_usage_chunk() const { return impl_->removed; }

}  // namespace faultline
