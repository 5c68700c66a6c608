// MCP over HTTP as a client, on libcurl: each POST a blocking transfer on a
// thread of its own (requests) or the sender's (notifications, responses,
// initialize), each event stream read as it comes.
#include "ctl/mcp_http_upstream.h"

#include <curl/curl.h>

#include <cstdlib>

#include "base/clock.h"
#include "ctl/flag_error.h"
#include "userspace/net/sse_parser.h"

namespace faultline {
namespace mcp_http_upstream_impl {

std::once_flag g_curl_once;

// One exchange's outcome.
struct Exchange {
  CURLcode code = CURLE_OK;
  std::string error;  // curl's words when code is not OK
  long status = 0;
  std::string content_type;
  std::string body;  // a body that is not an event stream, up to kMcpMaxLine
  bool body_over = false;
};

struct TransferCtx {
  std::function<void(const std::string&, const std::string&)> on_header;  // lower-case name, value
  std::function<void(const SseEvent&)> on_event;                          // an event stream's events
  const std::atomic<bool>* stop = nullptr;
  Exchange* ex = nullptr;
  SseParser sse{kMcpMaxLine};
  int kind = 0;  // 0 undecided, 1 event stream, 2 body
};

std::string trim_http_value(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

size_t on_header_line(char* p, size_t size, size_t n, void* ud) {
  auto* c = static_cast<TransferCtx*>(ud);
  const std::string line(p, size * n);
  if (line.starts_with("HTTP/")) {  // a new head (after a 100 Continue or a redirect)
    c->ex->content_type.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string value = trim_http_value(line.substr(colon + 1));
  if (name == "content-type") c->ex->content_type = value;
  if (c->on_header) c->on_header(name, value);
  return size * n;
}

size_t on_body(char* p, size_t size, size_t n, void* ud) {
  auto* c = static_cast<TransferCtx*>(ud);
  const std::string_view bytes(p, size * n);
  if (c->kind == 0) c->kind = c->ex->content_type.starts_with("text/event-stream") ? 1 : 2;
  if (c->kind == 1) {
    for (const auto& e : c->sse.feed(bytes))
      if (c->on_event) c->on_event(e);
  } else if (!c->ex->body_over) {
    if (c->ex->body.size() + bytes.size() > kMcpMaxLine) {
      c->ex->body_over = true;
      c->ex->body.clear();
    } else {
      c->ex->body.append(bytes);
    }
  }
  return size * n;
}

int on_progress(void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* c = static_cast<TransferCtx*>(ud);
  return c->stop != nullptr && c->stop->load() ? 1 : 0;
}

struct TransferSpec {
  std::string method = "POST";
  std::string url;
  std::vector<std::string> headers;
  std::string body;
  long total_timeout_ms = 0;  // 0: none (an event stream)
};

Exchange run_transfer(const TransferSpec& spec, TransferCtx ctx) {
  Exchange ex;
  ctx.ex = &ex;
  CURL* h = curl_easy_init();
  if (h == nullptr) {
    ex.code = CURLE_FAILED_INIT;
    ex.error = "curl_easy_init failed";
    return ex;
  }
  curl_slist* list = nullptr;
  for (const auto& hd : spec.headers) list = curl_slist_append(list, hd.c_str());
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(h, CURLOPT_URL, spec.url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 30'000L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header_line);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &ctx);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &ctx);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &ctx);
  if (spec.total_timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, spec.total_timeout_ms);
  if (spec.method == "POST") {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, spec.body.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(spec.body.size()));
  } else if (spec.method != "GET") {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, spec.method.c_str());
  }
  ex.code = curl_easy_perform(h);
  if (ex.code != CURLE_OK) ex.error = errbuf[0] != 0 ? std::string(errbuf) : curl_easy_strerror(ex.code);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &ex.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  return ex;
}

// JSON text as one line: a newline in JSON is whitespace outside strings
// (inside, it must be escaped), so turning it into a space keeps the message.
std::string json_one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// scheme://host:port of a URL, or "" when it does not parse.
std::string url_origin(CURLU* u) {
  std::string out;
  for (CURLUPart part : {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT}) {
    char* v = nullptr;
    if (curl_url_get(u, part, &v, CURLU_DEFAULT_PORT) != CURLUE_OK) return "";
    out += std::string(v) + "|";
    curl_free(v);
  }
  return out;
}

// The SSE transport's endpoint event: a URL relative to the stream's, on the
// same origin (a server naming another host is refused, as the SDK does).
Result<std::string> sse_endpoint_url(const std::string& base, const std::string& rel) {
  CURLU* b = curl_url();
  CURLU* u = curl_url();
  std::string out;
  Status st;
  if (curl_url_set(b, CURLUPART_URL, base.c_str(), 0) != CURLUE_OK ||
      curl_url_set(u, CURLUPART_URL, base.c_str(), 0) != CURLUE_OK ||
      curl_url_set(u, CURLUPART_URL, rel.c_str(), 0) != CURLUE_OK) {
    st = make_error(EPROTO, "the upstream's endpoint event is not a URL");
  } else if (url_origin(b) != url_origin(u)) {
    st = make_error(EPROTO, "the upstream's endpoint event names another origin: refused");
  } else {
    char* v = nullptr;
    if (curl_url_get(u, CURLUPART_URL, &v, 0) == CURLUE_OK) {
      out = v;
      curl_free(v);
    } else {
      st = make_error(EPROTO, "the upstream's endpoint event is not a URL");
    }
  }
  curl_url_cleanup(b);
  curl_url_cleanup(u);
  if (!st) return st.error();
  return out;
}

}  // namespace mcp_http_upstream_impl

using namespace mcp_http_upstream_impl;

Result<std::string> expand_header_env(const std::string& header) {
  std::string out;
  for (size_t i = 0; i < header.size();) {
    if (header.compare(i, 2, "${") == 0) {
      const size_t end = header.find('}', i + 2);
      if (end == std::string::npos) return bad("'${' without its '}'");
      const std::string name = header.substr(i + 2, end - i - 2);
      if (name.empty() || name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
                              std::string::npos)
        return bad("'${" + name + "}' is not a variable name (letters, digits, '_')");
      const char* v = std::getenv(name.c_str());
      if (v == nullptr || *v == 0) return bad("the variable " + name + " is not set");
      out += v;
      i = end + 1;
    } else {
      out += header[i++];
    }
  }
  if (out.find_first_of("\r\n") != std::string::npos) return bad("a value holds a line break");
  return out;
}

Result<std::unique_ptr<McpHttpUpstream>> McpHttpUpstream::start(McpHttpUpstreamOptions o) {
  std::call_once(g_curl_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<McpHttpUpstream> up(new McpHttpUpstream(std::move(o)));
  if (up->o_.transport == McpUpstreamTransport::Sse) {
    up->reader_ = std::thread([p = up.get()] { p->sse_reader(); });
    std::unique_lock lock(up->mu_);
    if (!up->cv_.wait_for(lock, up->o_.connect_timeout,
                          [&] { return !up->endpoint_.empty() || up->endpoint_failed_; })) {
      lock.unlock();
      up->stop();
      return make_error(ETIMEDOUT, "--upstream-url: no endpoint event on the SSE stream within " +
                                       std::to_string(up->o_.connect_timeout.count() / 1000) + " s");
    }
    if (up->endpoint_.empty()) {
      lock.unlock();
      up->stop();
      return make_error(ECONNREFUSED, "--upstream-url: the SSE stream could not be opened (see above)");
    }
  }
  up->sender_ = std::thread([p = up.get()] { p->sender_loop(); });
  return up;
}

McpHttpUpstream::~McpHttpUpstream() { stop(); }

void McpHttpUpstream::send(std::string line) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(line));
  }
  cv_.notify_all();
}

std::vector<std::string> McpHttpUpstream::request_headers(bool event_stream_only) const {
  std::vector<std::string> h = o_.headers;
  h.push_back(event_stream_only ? "Accept: text/event-stream" : "Accept: application/json, text/event-stream");
  std::lock_guard lock(mu_);
  if (!session_id_.empty()) h.push_back("Mcp-Session-Id: " + session_id_);
  if (!protocol_version_.empty()) h.push_back("MCP-Protocol-Version: " + protocol_version_);
  return h;
}

void McpHttpUpstream::deliver(std::string data) {
  data = json_one_line(std::move(data));
  {
    std::lock_guard lock(mu_);
    if (protocol_version_.empty() && data.find("\"protocolVersion\"") != std::string::npos) {
      const McpMessage m = parse_mcp_message(data);
      if (m.kind == McpMessage::Kind::Response && m.doc.contains("result") && m.doc["result"].is_object() &&
          m.doc["result"].contains("protocolVersion") && m.doc["result"]["protocolVersion"].is_string()) {
        const std::string v = m.doc["result"]["protocolVersion"].get<std::string>();
        if (v.size() < 64 && v.find_first_of("\r\n") == std::string::npos) protocol_version_ = v;
      }
    }
  }
  o_.on_message(McpLineReader::Line{std::move(data), false});
}

void McpHttpUpstream::fail_request(const McpMessage& m, const std::string& why) {
  if (o_.log) o_.log("faultline mcp-guard: upstream: " + why);
  if (m.kind == McpMessage::Kind::Request)
    o_.on_message(McpLineReader::Line{jsonrpc_error_line(m.id, -32603, "faultline mcp-guard: " + why), false});
}

void McpHttpUpstream::post(const std::string& line) {
  const McpMessage m = parse_mcp_message(line);
  const bool request = m.kind == McpMessage::Kind::Request;
  TransferSpec spec;
  spec.body = line;
  spec.headers = request_headers(false);
  spec.headers.push_back("Content-Type: application/json");
  bool answered = false;
  auto answers = [&](const std::string& data) {
    if (!request) return;
    const McpMessage r = parse_mcp_message(data);
    if (r.kind == McpMessage::Kind::Response && r.id == m.id) answered = true;
  };
  TransferCtx ctx;
  ctx.stop = &stopping_;
  if (o_.transport == McpUpstreamTransport::Sse) {
    std::lock_guard lock(mu_);
    spec.url = endpoint_;
  } else {
    spec.url = o_.url;
    ctx.on_header = [this](const std::string& name, const std::string& value) {
      if (name != "mcp-session-id" || value.empty() || value.size() > 256) return;
      std::lock_guard lock(mu_);
      if (session_id_.empty()) session_id_ = value;
    };
    ctx.on_event = [&](const SseEvent& e) {
      if (e.type != "message" || e.data.empty()) return;
      answers(e.data);
      deliver(e.data);
    };
  }
  spec.total_timeout_ms = request ? 0 : 60'000;
  const Exchange ex = run_transfer(spec, std::move(ctx));
  if (stopping_.load()) return;
  if (ex.code != CURLE_OK) return fail_request(m, "the upstream could not be reached: " + ex.error);
  bool had_session = false;
  {
    std::lock_guard lock(mu_);
    had_session = !session_id_.empty();
  }
  if (ex.status == 404 && o_.transport == McpUpstreamTransport::Streamable && had_session)
    return fail_request(m, "the upstream answered 404: its session is gone");
  if (ex.status < 200 || ex.status >= 300)
    return fail_request(m, "the upstream answered HTTP " + std::to_string(ex.status));
  if (ex.body_over) return fail_request(m, "the upstream's answer is over 10 MiB: refused");
  if (o_.transport == McpUpstreamTransport::Streamable && !ex.body.empty() &&
      !ex.content_type.starts_with("text/event-stream")) {
    nlohmann::json doc = nlohmann::json::parse(ex.body, nullptr, false);
    if (doc.is_array()) {
      for (const auto& one : doc) {
        answers(one.dump());
        deliver(one.dump());
      }
    } else {
      answers(ex.body);
      deliver(ex.body);  // not JSON: the gate counts it as a bad line from the server
    }
  }
  if (request && !answered && o_.transport == McpUpstreamTransport::Streamable)
    fail_request(m, "the upstream's answer (HTTP " + std::to_string(ex.status) + ") carried no response to " +
                        (m.method.empty() ? std::string("the request") : m.method));
}

void McpHttpUpstream::sender_loop() {
  struct Running {
    std::thread t;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Running> running;
  for (;;) {
    std::string line;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_.load() || !queue_.empty(); });
      if (stopping_.load()) break;
      line = std::move(queue_.front());
      queue_.pop_front();
    }
    std::erase_if(running, [](Running& r) {
      if (!r.done->load()) return false;
      r.t.join();
      return true;
    });
    const McpMessage m = parse_mcp_message(line);
    // Requests run side by side (a slow tool holds no other message); the
    // rest, and initialize (its answer brings the session), in order.
    if (o_.transport == McpUpstreamTransport::Streamable && m.kind == McpMessage::Kind::Request &&
        m.method != "initialize") {
      auto done = std::make_shared<std::atomic<bool>>(false);
      running.push_back(Running{std::thread([this, line, done] {
                                  post(line);
                                  done->store(true);
                                }),
                                done});
      continue;
    }
    post(line);
    if (o_.transport == McpUpstreamTransport::Streamable && m.method == "initialize") {
      std::lock_guard lock(mu_);
      if (!get_started_) {
        get_started_ = true;
        reader_ = std::thread([this] { streamable_get_loop(); });
      }
    }
  }
  for (auto& r : running) r.t.join();
}

// Streamable HTTP: the server's own messages (notifications, its requests)
// on a GET stream, opened again when it ends; a server without one answers 405.
void McpHttpUpstream::streamable_get_loop() {
  for (int attempt = 0; !stopping_.load(); ++attempt) {
    TransferSpec spec;
    spec.method = "GET";
    spec.url = o_.url;
    spec.headers = request_headers(true);
    TransferCtx ctx;
    ctx.stop = &stopping_;
    ctx.on_event = [this](const SseEvent& e) {
      if (e.type == "message" && !e.data.empty()) deliver(e.data);
    };
    const uint64_t began = monotonic_ns();
    const Exchange ex = run_transfer(spec, std::move(ctx));
    if (stopping_.load()) return;
    if (ex.code == CURLE_OK && ex.status == 405) {
      if (o_.log) o_.log("faultline mcp-guard: upstream: no GET stream (405): the server's messages come with answers");
      return;
    }
    if (ex.code != CURLE_OK || ex.status != 200) {
      if (o_.log)
        o_.log("faultline mcp-guard: upstream: the GET stream " +
               (ex.code != CURLE_OK ? "failed: " + ex.error : "was answered HTTP " + std::to_string(ex.status)));
      if (ex.code == CURLE_OK) return;
    }
    // Ended: opened again, at once after a long stream, after a pause otherwise.
    if (monotonic_ns() - began < 5'000'000'000ULL)
      for (int i = 0; i < 10 && !stopping_.load(); ++i) sleep_ms(100);
  }
}

void McpHttpUpstream::sse_reader() {
  TransferSpec spec;
  spec.method = "GET";
  spec.url = o_.url;
  spec.headers = request_headers(true);
  TransferCtx ctx;
  ctx.stop = &stopping_;
  ctx.on_event = [this](const SseEvent& e) {
    if (e.type == "endpoint") {
      auto url = sse_endpoint_url(o_.url, trim_http_value(e.data));
      std::lock_guard lock(mu_);
      if (!url) {
        if (o_.log) o_.log("faultline mcp-guard: upstream: " + url.error().message);
        endpoint_failed_ = true;
      } else if (endpoint_.empty()) {
        endpoint_ = *url;
      }
      cv_.notify_all();
    } else if (e.type == "message" && !e.data.empty()) {
      deliver(e.data);
    }
  };
  const Exchange ex = run_transfer(spec, std::move(ctx));
  if (!stopping_.load() && o_.log)
    o_.log("faultline mcp-guard: upstream: the SSE stream " + (ex.code != CURLE_OK ? "failed: " + ex.error
                                                               : ex.status != 200
                                                                   ? "was answered HTTP " + std::to_string(ex.status)
                                                                   : std::string("ended")));
  std::lock_guard lock(mu_);
  endpoint_failed_ = true;
  gone_.store(true);
  cv_.notify_all();
}

void McpHttpUpstream::stop() {
  if (stopping_.exchange(true)) return;
  cv_.notify_all();
  if (sender_.joinable()) sender_.join();
  if (reader_.joinable()) reader_.join();
  std::string session;
  {
    std::lock_guard lock(mu_);
    session = session_id_;
  }
  if (o_.transport == McpUpstreamTransport::Streamable && !session.empty()) {
    // The end of the session, as the transport asks of a client that leaves.
    TransferSpec spec;
    spec.method = "DELETE";
    spec.url = o_.url;
    spec.headers = o_.headers;
    spec.headers.push_back("Mcp-Session-Id: " + session);
    spec.total_timeout_ms = 5'000;
    (void)run_transfer(spec, TransferCtx{});
  }
}

}  // namespace faultline
