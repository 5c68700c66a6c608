// The answer's texts by provider shape, each channel a DLP stream and a text
// the injection rules read; the transformer that holds, forwards or replaces.
#include "userspace/guard/response_guard.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>

#include "userspace/guard/llm_framing.h"

namespace faultline {
// File-local names are unique in the library: it compiles as unity batches.
namespace response_guard_detail {

using RgJson = nlohmann::json;

constexpr size_t kInjectionWindow = 1024;            // the tail read after each piece
constexpr size_t kMaxChannelText = 256 * 1024;       // read whole at the channel's end
constexpr size_t kMaxChannels = 512;                 // per answer; later texts are not read
constexpr size_t kMaxHeldAnswer = 16 * 1024 * 1024;  // a JSON answer held whole to be replaced

const RgJson& rg_member(const RgJson& o, const char* key) {
  static const RgJson kNull;
  if (!o.is_object()) return kNull;
  const auto it = o.find(key);
  return it == o.end() ? kNull : *it;
}

std::string rg_text(const RgJson& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

uint64_t rg_index(const RgJson& v) { return v.is_number_unsigned() ? v.get<uint64_t>() : 0; }

}  // namespace response_guard_detail

using namespace response_guard_detail;

Result<std::shared_ptr<const ResponseGuard>> ResponseGuard::build(std::shared_ptr<PromptGuard> prompt) {
  auto g = std::shared_ptr<ResponseGuard>(new ResponseGuard());
  DlpEngine::Options o;
  for (DlpType t : all_dlp_types())
    if (t != DlpType::email) o.types.push_back(t);
  auto engine = DlpEngine::build(std::move(o));
  if (!engine) return engine.error();
  g->dlp_ = *engine;
  if (!prompt) {
    auto built = PromptGuard::build();
    if (!built) return built.error();
    prompt = *built;
  }
  g->prompt_ = std::move(prompt);
  return std::shared_ptr<const ResponseGuard>(std::move(g));
}

struct ResponseScanner::Impl {
  struct Channel {
    std::string where;
    std::unique_ptr<DlpStream> dlp;
    std::string text;  // its first kMaxChannelText bytes
    bool ended = false;
  };

  Impl(std::shared_ptr<const ResponseGuard> g, LlmEndpoint e) : guard(std::move(g)), endpoint(e) {}

  Channel* channel(const std::string& key, const char* where) {
    auto it = channels.find(key);
    if (it != channels.end()) return it->second.ended ? nullptr : &it->second;
    if (channels.size() >= kMaxChannels) return nullptr;
    Channel& c = channels[key];
    c.where = where;
    c.dlp = std::make_unique<DlpStream>(guard->dlp());
    return &c;
  }

  void add(const std::string& key, const char* where, std::string_view piece) {
    if (piece.empty()) return;
    Channel* c = channel(key, where);
    if (c == nullptr) return;
    c->dlp->feed(piece);
    auto m = std::find_if(mark.begin(), mark.end(), [&](const auto& kv) { return kv.first == key; });
    if (m == mark.end())
      mark.emplace_back(key, c->dlp->raw_fed());
    else
      m->second = c->dlp->raw_fed();
    const size_t room = kMaxChannelText - std::min(kMaxChannelText, c->text.size());
    c->text.append(piece.substr(0, room));
    take_dlp(*c);
    // The tail, from a character's first byte: a phrase that just ended.
    size_t from = c->text.size() > kInjectionWindow ? c->text.size() - kInjectionWindow : 0;
    while (from < c->text.size() && (static_cast<unsigned char>(c->text[from]) & 0xc0) == 0x80) ++from;
    inject(*c, std::string_view(c->text).substr(from));
  }

  void end(const std::string& key) {
    auto it = channels.find(key);
    if (it == channels.end() || it->second.ended) return;
    end(it->second);
  }

  void end(Channel& c) {
    c.ended = true;
    c.dlp->finish();
    take_dlp(c);
    inject(c, c.text);
  }

  void take_dlp(const Channel& c) {
    for (const DlpFinding& f : c.dlp->findings()) {
      if (!f.type) continue;
      add_threat({f.kind(), c.where, f.hint, true});
    }
  }

  void inject(const Channel& c, std::string_view text) {
    for (const InjectionFinding& f : guard->prompt().scan_text(text, PromptSource::tool_result))
      add_threat({std::string(injection_family_name(f.family)), c.where, "read as " + f.view, false});
  }

  void add_threat(ResponseThreat t) {
    for (const ResponseThreat& have : threats)
      if (have.kind == t.kind && have.where == t.where) return;
    threats.push_back(std::move(t));
  }

  // One SSE event's JSON, by provider.
  void event(const RgJson& j) {
    const std::string type = rg_text(rg_member(j, "type"));
    switch (endpoint) {
      case LlmEndpoint::AnthropicMessages: {
        const std::string key = std::to_string(rg_index(rg_member(j, "index")));
        if (type == "content_block_start") {
          const RgJson& b = rg_member(j, "content_block");
          const std::string bt = rg_text(rg_member(b, "type"));
          if (bt == "text") add(key, "answer text", rg_text(rg_member(b, "text")));
          if (bt == "thinking") add(key, "thinking", rg_text(rg_member(b, "thinking")));
          if (bt == "tool_use") {
            const RgJson& input = rg_member(b, "input");
            (void)channel(key, "tool call arguments");
            if (input.is_object() && !input.empty()) add(key, "tool call arguments", input.dump());
          }
        } else if (type == "content_block_delta") {
          const RgJson& d = rg_member(j, "delta");
          const std::string dt = rg_text(rg_member(d, "type"));
          if (dt == "text_delta") add(key, "answer text", rg_text(rg_member(d, "text")));
          if (dt == "thinking_delta") add(key, "thinking", rg_text(rg_member(d, "thinking")));
          if (dt == "input_json_delta") add(key, "tool call arguments", rg_text(rg_member(d, "partial_json")));
        } else if (type == "content_block_stop") {
          end(key);
        }
        return;
      }
      case LlmEndpoint::OpenAIChat: {
        const RgJson& choices = rg_member(j, "choices");
        if (!choices.is_array()) return;
        for (const RgJson& c : choices) {
          const std::string choice = std::to_string(rg_index(rg_member(c, "index")));
          const RgJson& d = rg_member(c, "delta");
          add(choice + " content", "answer text", rg_text(rg_member(d, "content")));
          add(choice + " refusal", "answer text", rg_text(rg_member(d, "refusal")));
          const RgJson& calls = rg_member(d, "tool_calls");
          if (calls.is_array())
            for (const RgJson& t : calls)
              add(choice + " tool " + std::to_string(rg_index(rg_member(t, "index"))), "tool call arguments",
                  rg_text(rg_member(rg_member(t, "function"), "arguments")));
        }
        return;
      }
      case LlmEndpoint::OpenAIResponses: {
        const std::string out = std::to_string(rg_index(rg_member(j, "output_index")));
        if (type == "response.output_text.delta" || type == "response.refusal.delta")
          add(out + " " + std::to_string(rg_index(rg_member(j, "content_index"))), "answer text",
              rg_text(rg_member(j, "delta")));
        else if (type == "response.reasoning_summary_text.delta")
          add(out + " reasoning", "thinking", rg_text(rg_member(j, "delta")));
        else if (type == "response.function_call_arguments.delta")
          add(out + " call", "tool call arguments", rg_text(rg_member(j, "delta")));
        else if (type == "response.output_item.done")
          for (auto& [key, c] : channels)
            if (key.rfind(out + " ", 0) == 0 && !c.ended) end(c);
        return;
      }
      case LlmEndpoint::None:
        return;
    }
  }

  // A whole JSON answer, by provider.
  void body(const RgJson& j) {
    switch (endpoint) {
      case LlmEndpoint::AnthropicMessages: {
        const RgJson& content = rg_member(j, "content");
        if (!content.is_array()) return;
        size_t i = 0;
        for (const RgJson& b : content) {
          const std::string key = std::to_string(i++);
          const std::string bt = rg_text(rg_member(b, "type"));
          if (bt == "text") add(key, "answer text", rg_text(rg_member(b, "text")));
          if (bt == "thinking") add(key, "thinking", rg_text(rg_member(b, "thinking")));
          if (bt == "tool_use") add(key, "tool call arguments", rg_member(b, "input").dump());
        }
        return;
      }
      case LlmEndpoint::OpenAIChat: {
        const RgJson& choices = rg_member(j, "choices");
        if (!choices.is_array()) return;
        size_t i = 0;
        for (const RgJson& c : choices) {
          const std::string choice = std::to_string(i++);
          const RgJson& m = rg_member(c, "message");
          add(choice + " content", "answer text", rg_text(rg_member(m, "content")));
          add(choice + " refusal", "answer text", rg_text(rg_member(m, "refusal")));
          const RgJson& calls = rg_member(m, "tool_calls");
          if (!calls.is_array()) continue;
          size_t k = 0;
          for (const RgJson& t : calls)
            add(choice + " tool " + std::to_string(k++), "tool call arguments",
                rg_text(rg_member(rg_member(t, "function"), "arguments")));
        }
        return;
      }
      case LlmEndpoint::OpenAIResponses: {
        const RgJson& output = rg_member(j, "output");
        if (!output.is_array()) return;
        size_t i = 0;
        for (const RgJson& o : output) {
          const std::string out = std::to_string(i++);
          const std::string ot = rg_text(rg_member(o, "type"));
          if (ot == "function_call") add(out + " call", "tool call arguments", rg_text(rg_member(o, "arguments")));
          const RgJson& content = rg_member(o, "content");
          if (ot != "message" || !content.is_array()) continue;
          size_t k = 0;
          for (const RgJson& c : content)
            add(out + " " + std::to_string(k++), "answer text",
                rg_text(rg_member(c, rg_text(rg_member(c, "type")) == "refusal" ? "refusal" : "text")));
        }
        return;
      }
      case LlmEndpoint::None:
        return;
    }
  }

  void finish() {
    for (auto& [key, c] : channels)
      if (!c.ended) end(c);
  }

  [[nodiscard]] bool settled(const Mark& m) const {
    return std::all_of(m.begin(), m.end(), [&](const auto& kv) {
      auto it = channels.find(kv.first);
      return it == channels.end() || it->second.ended || it->second.dlp->settled_raw() >= kv.second;
    });
  }

  std::shared_ptr<const ResponseGuard> guard;
  LlmEndpoint endpoint;
  std::map<std::string, Channel> channels;
  std::vector<ResponseThreat> threats;
  Mark mark;
};

ResponseScanner::ResponseScanner(std::shared_ptr<const ResponseGuard> guard, LlmEndpoint endpoint)
    : impl_(std::make_unique<Impl>(std::move(guard), endpoint)) {}
ResponseScanner::~ResponseScanner() = default;

void ResponseScanner::event(std::string_view data) {
  const RgJson j = RgJson::parse(data, nullptr, false);
  if (j.is_object()) impl_->event(j);
}

void ResponseScanner::body(std::string_view json) {
  const RgJson j = RgJson::parse(json, nullptr, false);
  if (j.is_object()) impl_->body(j);
  impl_->finish();
}

void ResponseScanner::finish() { impl_->finish(); }
const std::vector<ResponseThreat>& ResponseScanner::threats() const { return impl_->threats; }
std::string ResponseScanner::answer_text() const {
  std::string out;
  for (const auto& [key, c] : impl_->channels)
    if (c.where == "answer text") out += (out.empty() ? "" : "\n") + c.text;
  return out;
}

ResponseScanner::Mark ResponseScanner::take_mark() { return std::exchange(impl_->mark, {}); }
bool ResponseScanner::settled(const Mark& mark) const { return impl_->settled(mark); }

std::string sse_error_event(const Denial& denial, DenialFormat format, LlmEndpoint endpoint) {
  const LlmAnswer a = denial_answer(denial, format);
  if (format == DenialFormat::Anthropic) return "event: error\ndata: " + a.body + "\n\n";
  if (endpoint != LlmEndpoint::OpenAIResponses) return "data: " + a.body + "\n\n";
  RgJson j = RgJson::parse(a.body, nullptr, false);
  const RgJson& e = rg_member(j, "error");
  nlohmann::ordered_json out = {{"type", "error"},
                                {"code", rg_member(e, "code")},
                                {"message", rg_member(e, "message")},
                                {"param", nullptr},
                                {"error", e}};
  return "event: error\ndata: " + out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
}

struct ResponseGuardStream::Impl : llm_framing::FramerSink, llm_framing::SseSink {
  // block: an event held in stream mode, until its text is settled.
  struct HeldEvent {
    size_t out_end;              // the reader's output after it, counted from its start
    ResponseScanner::Mark mark;  // the texts it added to (empty: none)
  };
  enum class Mode : uint8_t {
    head,         // the head is being read: its bytes are held
    passthrough,  // the rest goes as it comes (observe, or an answer not read)
    hold_whole,   // block: the answer is held whole, then forwarded or replaced
    stream,       // block: an event stream, event by event
    stopped,      // block: replaced or ended; what comes after is dropped
  };

  explicit Impl(Options o) : opts(std::move(o)), framer(*this), sse(*this, true), scan(opts.guard, opts.endpoint) {}

  void on_head(const llm_framing::ResponseHead& h, std::string_view raw) override {
    if (h.status >= 100 && h.status < 200) {
      interim.append(raw);
      return;
    }
    head = h;
    if (!h.encoding.empty())
      unread_why = "a compressed body (Content-Encoding: " + h.encoding + ")";
    else if (h.status < 200 || h.status > 299)
      unread_why = "an error status";
    if (!opts.block || !unread_why.empty()) {
      mode = Mode::passthrough;
    } else if (h.sse && (h.mode == llm_framing::BodyMode::chunked || h.mode == llm_framing::BodyMode::until_close)) {
      // The head goes now; the body's bytes come back out of the reader, re-framed.
      mode = Mode::stream;
      raw_held.clear();
      out += std::exchange(interim, {});
      out += raw;
    } else {
      mode = Mode::hold_whole;
    }
  }

  void on_body(std::string_view data) override {
    if (!unread_why.empty()) return;
    if (head.sse) {
      sse.feed(data);
      if (mode == Mode::stream)
        release_events(false);
      else
        (void)sse.take_out();  // the raw bytes are held (or passed) as they came
    } else if (json.size() + data.size() <= llm_framing::kMaxJsonBody) {
      json.append(data);
    } else {
      unread_why = "a JSON answer larger than 16 MiB";
      std::string().swap(json);
    }
  }

  void on_body_end() override {
    body_ended = true;
    if (!unread_why.empty()) return;
    if (head.sse) {
      sse.finish();
      scan.finish();
      if (mode == Mode::stream) {
        release_events(true);
        if (mode == Mode::stream && head.mode == llm_framing::BodyMode::chunked)
          out += "0\r\n\r\n";  // trailers are not kept
      } else {
        (void)sse.take_out();
      }
    } else {
      scan.body(json);
      std::string().swap(json);
    }
  }

  bool on_event(std::string_view, std::string_view data, bool whole) override {
    if (whole) scan.event(data);
    last_mark = scan.take_mark();
    return false;
  }

  void on_dispatched(size_t out_size) override {
    if (mode == Mode::stream) held.push_back({reader_taken + out_size, std::exchange(last_mark, {})});
  }

  // Stream mode: the events whose texts are settled go, in order; at a
  // threat, none of the held ones does.
  void release_events(bool at_end) {
    take_reader_out();
    if (!scan.threats().empty()) return stop();
    size_t upto = 0;
    if (at_end) {
      upto = pending.size();
      held.clear();
    } else {
      while (!held.empty() && scan.settled(held.front().mark)) {
        upto = held.front().out_end - taken;
        held.pop_front();
      }
    }
    if (upto == 0) return;
    send_body(std::string_view(pending).substr(0, upto));
    pending.erase(0, upto);
    taken += upto;
  }

  void take_reader_out() {
    const std::string more = sse.take_out();
    reader_taken += more.size();
    pending += more;
  }

  void stop() {
    mode = Mode::stopped;
    pending.clear();
    held.clear();
    Denial d = opts.denial;
    d.reason = reason();
    send_body(sse_error_event(d, opts.format, opts.endpoint));
    if (head.mode == llm_framing::BodyMode::chunked) out += "0\r\n\r\n";
    report(true);
  }

  void send_body(std::string_view bytes) {
    if (bytes.empty()) return;
    if (head.mode == llm_framing::BodyMode::chunked) {
      char size[24];
      std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
      out += size;
      out += bytes;
      out += "\r\n";
    } else {
      out += bytes;
    }
  }

  [[nodiscard]] std::string reason() const {
    std::string kinds;
    for (const ResponseThreat& t : scan.threats())
      if ((", " + kinds + ",").find(", " + t.kind + ",") == std::string::npos)
        kinds += (kinds.empty() ? "" : ", ") + t.kind;
    return "response threat: " + kinds + " in the answer";
  }

  void report(bool blocked) {
    if (reported || scan.threats().empty()) return;
    reported = true;
    is_blocked = blocked;
    if (opts.report) opts.report(scan.threats(), blocked);
  }

  std::string feed(std::string_view bytes) {
    if (mode == Mode::stopped) return std::exchange(out, {});
    if (bad) {
      if (opts.block) out.append(bytes);
      return std::exchange(out, {});
    }
    const Mode before = mode;
    if (opts.block && (mode == Mode::head || mode == Mode::hold_whole)) raw_held.append(bytes);
    const size_t used = framer.feed(bytes);
    if (framer.bad()) {
      bad = true;
      if (unread_why.empty()) unread_why = "bad framing (" + framer.problem() + ")";
      if (mode == Mode::stream) {
        take_reader_out();
        send_body(pending);
        pending.clear();
        held.clear();
        out.append(bytes.substr(used));
      } else if (opts.block) {
        out += std::exchange(interim, {});
        out += std::exchange(raw_held, {});
      }
      mode = Mode::passthrough;
      return std::exchange(out, {});
    }
    if (mode == Mode::passthrough) {
      if (opts.block) {
        if (before == Mode::passthrough) {
          out.append(bytes);
        } else {
          out += std::exchange(interim, {});
          out += std::exchange(raw_held, {});
        }
      }
    } else if (mode == Mode::hold_whole) {
      if (raw_held.size() > kMaxHeldAnswer) {
        unread_why = "an answer larger than 16 MiB";
        mode = Mode::passthrough;
        out += std::exchange(interim, {});
        out += std::exchange(raw_held, {});
      } else if (body_ended) {
        decide_whole();
      }
    }
    return std::exchange(out, {});
  }

  void decide_whole() {
    if (scan.threats().empty() || !unread_why.empty()) {
      mode = Mode::passthrough;
      out += std::exchange(interim, {});
      out += std::exchange(raw_held, {});
      return;
    }
    mode = Mode::stopped;
    std::string().swap(raw_held);
    Denial d = opts.denial;
    d.reason = reason();
    out += std::exchange(interim, {});
    out += denial_response(d, opts.format, false);
    report(true);
  }

  std::string finish() {
    if (mode == Mode::stopped) return std::exchange(out, {});
    framer.finish();                                              // a close-delimited body ends here (on_body_end)
    if (!body_ended && head.sse && unread_why.empty() && !bad) {  // a cut: what came is judged
      sse.finish();
      scan.finish();
    }
    if (mode == Mode::hold_whole) {
      if (body_ended) {
        decide_whole();
      } else {  // a cut before its end: passed on as it came
        out += std::exchange(interim, {});
        out += std::exchange(raw_held, {});
      }
    } else if (mode == Mode::head && opts.block) {
      out += std::exchange(interim, {});
      out += std::exchange(raw_held, {});
    } else if (mode == Mode::stream) {
      take_reader_out();
      if (!scan.threats().empty()) {
        stop();
        return std::exchange(out, {});
      }
      send_body(pending);
      pending.clear();
    }
    report(false);
    return std::exchange(out, {});
  }

  Options opts;
  llm_framing::ResponseFramer framer;
  llm_framing::SseReader sse;
  ResponseScanner scan;
  llm_framing::ResponseHead head;
  Mode mode = Mode::head;
  bool bad = false;
  bool body_ended = false;
  bool reported = false;
  bool is_blocked = false;
  std::string unread_why;
  std::string json;
  std::string interim;      // 1xx heads, sent before what follows them
  std::string raw_held;     // head and hold_whole: the bytes as they came
  std::string pending;      // stream: the reader's output not yet released, from `taken`
  size_t taken = 0;         // stream: the reader's output released (or dropped) before `pending`
  size_t reader_taken = 0;  // stream: the reader's output taken so far (`taken` + pending's size)
  std::deque<HeldEvent> held;
  ResponseScanner::Mark last_mark;
  std::string out;
};

ResponseGuardStream::ResponseGuardStream(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
ResponseGuardStream::~ResponseGuardStream() = default;

std::string ResponseGuardStream::feed(std::string_view bytes) {
  std::string out = impl_->feed(bytes);
  return impl_->opts.block ? out : std::string();
}

std::string ResponseGuardStream::finish() {
  std::string out = impl_->finish();
  return impl_->opts.block ? out : std::string();
}

const std::vector<ResponseThreat>& ResponseGuardStream::threats() const { return impl_->scan.threats(); }
bool ResponseGuardStream::blocked() const { return impl_->is_blocked; }
std::string_view ResponseGuardStream::unread() const { return impl_->unread_why; }
const ResponseScanner& ResponseGuardStream::scanner() const { return impl_->scan; }

}  // namespace faultline
