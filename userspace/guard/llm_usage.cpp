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

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace llm_usage_detail {

using Json = nlohmann::json;

constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kMaxJsonBody = 16 * 1024 * 1024;  // a non-streamed answer, parsed whole
constexpr size_t kMaxEventData = 8 * 1024 * 1024;  // response.completed carries the whole output
constexpr size_t kMaxHeldRaw = 1024 * 1024;        // the filter holds no bigger event back

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

enum class BodyMode : uint8_t { none, length, chunked, until_close };

struct ResponseHead {
  int status = 0;
  bool sse = false;
  std::string encoding;  // Content-Encoding, lowercase ("" or "identity": none)
  BodyMode mode = BodyMode::until_close;
};

// The framer's events.
class FramerSink {
 public:
  virtual ~FramerSink() = default;
  virtual void on_head(const ResponseHead& head, std::string_view raw) = 0;  // 1xx heads too
  virtual void on_body(std::string_view data) = 0;                           // de-chunked
  virtual void on_body_end() = 0;                                            // the body is whole
};

// One HTTP/1.1 response, incrementally: its head (after any 1xx), then its
// body de-chunked. Lenient where clients are (bare LF line ends), strict where
// a mistake would misplace the body (chunk sizes, their CRLF).
class ResponseFramer {
 public:
  explicit ResponseFramer(FramerSink& sink) : sink_(sink) {}

  // The bytes consumed: all of them, unless the framing is bad (then where it failed).
  size_t feed(std::string_view bytes) {
    size_t i = 0;
    while (i < bytes.size() && state_ != State::bad) {
      const char c = bytes[i];
      switch (state_) {
        case State::head:
          head_.push_back(c);
          ++i;
          if (head_.size() > kMaxHeadBytes) {
            fail("a response head larger than 64 KiB");
          } else if (c == '\n' && (head_.ends_with("\r\n\r\n") || head_.ends_with("\n\n"))) {
            end_head();
          }
          break;
        case State::length: {
          const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size() - i));
          sink_.on_body(bytes.substr(i, take));
          i += take;
          remaining_ -= take;
          if (remaining_ == 0) end_body();
          break;
        }
        case State::until_close:
          sink_.on_body(bytes.substr(i));
          i = bytes.size();
          break;
        case State::chunk_size:
          ++i;
          if (const int h = hex_digit(c); h >= 0) {
            if (remaining_ > (uint64_t{1} << 40)) fail("a chunk size beyond 1 TiB");
            remaining_ = remaining_ * 16 + static_cast<uint64_t>(h);
            size_digits_ = true;
          } else if (c == ';' || c == ' ' || c == '\t') {
            if (size_digits_)
              state_ = State::chunk_ext;
            else
              fail("a chunk extension without a size");
          } else if (c == '\r') {
            state_ = State::chunk_size_lf;
          } else if (c == '\n') {
            end_size_line();
          } else {
            fail("a bad chunk size");
          }
          break;
        case State::chunk_ext:
          ++i;
          if (c == '\n') end_size_line();
          break;
        case State::chunk_size_lf:
          ++i;
          if (c == '\n')
            end_size_line();
          else
            fail("a chunk size line without its LF");
          break;
        case State::chunk_data: {
          const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, bytes.size() - i));
          sink_.on_body(bytes.substr(i, take));
          i += take;
          remaining_ -= take;
          if (remaining_ == 0) state_ = State::chunk_data_cr;
          break;
        }
        case State::chunk_data_cr:
          ++i;
          if (c == '\r')
            state_ = State::chunk_data_lf;
          else if (c == '\n')
            next_chunk();
          else
            fail("a chunk not followed by CRLF");
          break;
        case State::chunk_data_lf:
          ++i;
          if (c == '\n')
            next_chunk();
          else
            fail("a chunk not followed by CRLF");
          break;
        case State::trailer:
          ++i;
          if (c == '\n') {
            if (trailer_line_ == 0) end_body();
            trailer_line_ = 0;
          } else if (c != '\r') {
            ++trailer_line_;
          }
          break;
        case State::done:
          i = bytes.size();  // nothing belongs to this exchange after its response
          break;
        case State::bad:
          break;
      }
    }
    return i;
  }

  // The connection's end: a body read until close is whole now.
  void finish() {
    if (state_ == State::until_close) end_body();
  }

  [[nodiscard]] bool bad() const { return state_ == State::bad; }
  [[nodiscard]] bool done() const { return state_ == State::done; }
  [[nodiscard]] const std::string& problem() const { return problem_; }

 private:
  enum class State : uint8_t {
    head,
    length,
    until_close,
    chunk_size,
    chunk_ext,
    chunk_size_lf,
    chunk_data,
    chunk_data_cr,
    chunk_data_lf,
    trailer,
    done,
    bad
  };

  void fail(std::string why) {
    state_ = State::bad;
    problem_ = std::move(why);
  }

  void end_head() {
    ResponseHead h;
    std::string_view text(head_);
    size_t eol = text.find('\n');
    std::string_view status_line = trim(text.substr(0, eol));
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ') {
      return fail("not an HTTP/1.x status line");
    }
    for (size_t k = 9; k < 12; ++k) {
      if (!std::isdigit(static_cast<unsigned char>(status_line[k]))) return fail("a bad status code");
      h.status = h.status * 10 + (status_line[k] - '0');
    }
    bool chunked = false;
    std::optional<uint64_t> length;
    while (eol != std::string_view::npos && eol + 1 < text.size()) {
      const size_t start = eol + 1;
      eol = text.find('\n', start);
      const std::string_view line = text.substr(start, eol == std::string_view::npos ? text.npos : eol - start);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string name = lower(trim(line.substr(0, colon)));
      const std::string value = lower(trim(line.substr(colon + 1)));
      if (name == "content-type")
        h.sse = value.starts_with("text/event-stream");
      else if (name == "content-encoding")
        h.encoding = value == "identity" ? "" : value;
      else if (name == "transfer-encoding")
        chunked = value.find("chunked") != std::string::npos;
      else if (name == "content-length") {
        if (value.empty() || value.size() > 18) return fail("a bad Content-Length");
        uint64_t v = 0;
        for (char d : value) {
          if (!std::isdigit(static_cast<unsigned char>(d))) return fail("a bad Content-Length");
          v = v * 10 + static_cast<uint64_t>(d - '0');
        }
        length = v;
      }
    }
    const bool interim = h.status >= 100 && h.status < 200 && h.status != 101;
    if (interim) {
      h.mode = BodyMode::none;
      sink_.on_head(h, head_);
      head_.clear();
      return;  // the real response follows
    }
    if (h.status == 204 || h.status == 304)
      h.mode = BodyMode::none;
    else if (chunked)
      h.mode = BodyMode::chunked;
    else if (length)
      h.mode = BodyMode::length;
    sink_.on_head(h, head_);
    head_.clear();
    head_.shrink_to_fit();
    switch (h.mode) {
      case BodyMode::none:
        return end_body();
      case BodyMode::length:
        remaining_ = *length;
        state_ = State::length;
        if (remaining_ == 0) end_body();
        return;
      case BodyMode::chunked:
        return next_chunk();
      case BodyMode::until_close:
        state_ = State::until_close;
        return;
    }
  }

  void next_chunk() {
    state_ = State::chunk_size;
    remaining_ = 0;
    size_digits_ = false;
  }

  void end_size_line() {
    if (!size_digits_) return fail("a chunk size line without a size");
    if (remaining_ == 0) {
      state_ = State::trailer;
      trailer_line_ = 0;
    } else {
      state_ = State::chunk_data;
    }
  }

  void end_body() {
    state_ = State::done;
    sink_.on_body_end();
  }

  FramerSink& sink_;
  State state_ = State::head;
  std::string head_;
  uint64_t remaining_ = 0;
  bool size_digits_ = false;
  size_t trailer_line_ = 0;
  std::string problem_;
};

// The SSE reader's events: `raw` is the event's bytes as they came, its blank
// line included (empty unless the reader keeps raw bytes). Returning true
// drops those bytes from out().
class SseSink {
 public:
  virtual ~SseSink() = default;
  virtual bool on_event(std::string_view type, std::string_view data, bool whole) = 0;
};

// Server-sent events (the WHATWG framing): lines end in LF, CRLF or CR; a
// blank line dispatches the event; `data:` lines join with LF; `:` starts a
// comment. Bounded: an event's data beyond kMaxEventData is cut (dispatched
// as not whole), and with raw bytes kept, an event bigger than kMaxHeldRaw
// goes out before its end (it can no longer be dropped).
class SseReader {
 public:
  SseReader(SseSink& sink, bool keep_raw) : sink_(sink), keep_raw_(keep_raw) {}

  void feed(std::string_view bytes) {
    for (char c : bytes) {
      if (pending_dispatch_) {  // a blank line ended by CR: its LF belongs to the event
        pending_dispatch_ = false;
        if (c == '\n') {
          keep(c);
          dispatch();
          continue;
        }
        dispatch();
      }
      if (skip_lf_) {
        skip_lf_ = false;
        if (c == '\n') {
          keep(c);
          continue;
        }
      }
      keep(c);
      if (c == '\n' || c == '\r') {
        if (c == '\r') skip_lf_ = true;
        if (line_.empty() && !line_overflow_) {
          if (c == '\r') {
            skip_lf_ = false;
            pending_dispatch_ = true;
          } else {
            dispatch();
          }
        } else {
          end_line();
        }
        continue;
      }
      if (line_.size() < kMaxEventData)
        line_.push_back(c);
      else
        line_overflow_ = true;
    }
    if (keep_raw_ && raw_.size() > kMaxHeldRaw) {  // too big to be the usage chunk: let it go
      out_ += raw_;
      raw_.clear();
      raw_flushed_ = true;
    }
  }

  // The end of the body: an event without its blank line is not dispatched
  // (a cut), its raw bytes go out.
  void finish() {
    if (pending_dispatch_) {
      pending_dispatch_ = false;
      dispatch();
    }
    out_ += raw_;
    raw_.clear();
  }

  // The bytes to pass on (raw mode), taken.
  [[nodiscard]] std::string take_out() { return std::exchange(out_, {}); }

 private:
  void keep(char c) {
    if (keep_raw_) raw_.push_back(c);
  }

  void end_line() {
    std::string_view line(line_);
    if (!line.starts_with(':')) {
      const size_t colon = line.find(':');
      const std::string_view field = line.substr(0, colon);
      std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
      if (value.starts_with(' ')) value.remove_prefix(1);
      if (field == "data") {
        if (data_.size() + value.size() + 1 > kMaxEventData || line_overflow_) {
          whole_ = false;
        } else {
          data_.append(value);
          data_.push_back('\n');
          has_data_ = true;
        }
      } else if (field == "event") {
        type_.assign(value.substr(0, 256));
      }
    }
    line_.clear();
    line_overflow_ = false;
  }

  void dispatch() {
    bool drop = false;
    if (has_data_ || !whole_) {
      if (!data_.empty()) data_.pop_back();  // the last data line's LF
      drop = sink_.on_event(type_, data_, whole_) && !raw_flushed_;
    }
    if (keep_raw_ && !drop) out_ += raw_;
    raw_.clear();
    raw_flushed_ = false;
    data_.clear();
    type_.clear();
    has_data_ = false;
    whole_ = true;
  }

  SseSink& sink_;
  bool keep_raw_;
  std::string line_;
  bool line_overflow_ = false;
  bool skip_lf_ = false;
  bool pending_dispatch_ = false;
  std::string type_;
  std::string data_;
  bool has_data_ = false;
  bool whole_ = true;
  std::string raw_;
  bool raw_flushed_ = false;
  std::string out_;
};

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
