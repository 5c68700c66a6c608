// The incremental HTTP/1.1 response framer (head, then a chunked, sized or
// close-delimited body, de-chunked) and the server-sent-events reader, over
// bytes in any pieces: shared by the LLM answer readers (usage, tool calls,
// --scan-responses). Hand-written, so fuzzed (llm_usage, response_guard).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace faultline::llm_framing {

inline constexpr size_t kMaxHeadBytes = 64 * 1024;
inline constexpr size_t kMaxJsonBody = 16 * 1024 * 1024;  // a non-streamed answer, parsed whole
inline constexpr size_t kMaxEventData = 8 * 1024 * 1024;  // response.completed carries the whole output
inline constexpr size_t kMaxHeldRaw = 1024 * 1024;        // the filter holds no bigger event back

inline std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline int hex_digit(char c) {
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
  // With raw bytes kept: an event was dispatched and the reader's pending
  // output (take_out()) is now `out_size` bytes, its bytes included unless dropped.
  virtual void on_dispatched(size_t out_size) { (void)out_size; }
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
    if (keep_raw_) sink_.on_dispatched(out_.size());
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

}  // namespace faultline::llm_framing
