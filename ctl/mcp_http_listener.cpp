// Streamable HTTP for one MCP session on HttpServer: POST /mcp carries one
// JSON-RPC message, GET /mcp the server's own messages as events.
#include "ctl/mcp_http_listener.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/files.h"
#include "ctl/flag_error.h"
#include "userspace/net/http_router.h"

namespace faultline {
namespace mcp_http_listener_impl {

// The messages kept for a GET stream that is not (yet) open.
constexpr size_t kBacklog = 1000;

std::string random_session_id() {
  unsigned char b[16] = {};
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t n = ::getrandom(b + got, sizeof b - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool loopback_host(std::string_view host) {
  return host.starts_with("127.") || host == "[::1]" || host == "::1" || host == "localhost" ||
         host.starts_with("[::ffff:127.");
}

// "HOST:PORT" -> HOST ("[::1]:80" -> "[::1]").
std::string_view host_of(std::string_view address) {
  const size_t colon = address.rfind(':');
  return colon == std::string_view::npos ? address : address.substr(0, colon);
}

// An Origin header a browser on another site would send: the DNS rebinding
// the transport asks servers to refuse. Loopback origins only, unless remote
// clients are allowed.
bool origin_allowed(const std::string& origin, bool allow_remote) {
  if (allow_remote || origin == "null") return true;
  const size_t scheme = origin.find("://");
  if (scheme == std::string::npos) return false;
  std::string_view hostport = std::string_view(origin).substr(scheme + 3);
  if (hostport.starts_with("[")) return hostport.starts_with("[::1]");
  const size_t colon = hostport.find(':');
  return loopback_host(hostport.substr(0, colon));
}

HttpReply rpc_error(int status, const nlohmann::json& id, int code, const std::string& message) {
  return HttpReply::json(status, jsonrpc_error_line(id, code, message));
}

}  // namespace mcp_http_listener_impl

using namespace mcp_http_listener_impl;

Result<std::unique_ptr<McpHttpListener>> McpHttpListener::create(McpHttpListenerOptions o) {
  if (!o.allow_remote && !loopback_host(host_of(o.address)))
    return bad("--listen " + o.address +
               ": not a loopback address (127.0.0.1:PORT, [::1]:PORT); --allow-remote "
               "serves other addresses (anyone who reaches it speaks to the server)");
  HttpServerLimits limits;
  limits.request.max_body = kMcpMaxLine;                       // 413 beyond
  limits.request.max_head = 16 * 1024;                         // 431 beyond
  limits.request_timeout = std::chrono::milliseconds(30'000);  // 408
  auto server = HttpServer::create(limits);
  if (!server) return server.error();
  std::unique_ptr<McpHttpListener> l(new McpHttpListener(std::move(o), std::move(*server)));
  l->wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!l->wake_) return errno_error("eventfd");
  McpHttpListener* p = l.get();
  l->router_.add("POST", "/mcp",
                 [p](const HttpRequest& r, const PathParams&) { return p->checked(r, &McpHttpListener::post); });
  l->router_.add("GET", "/mcp",
                 [p](const HttpRequest& r, const PathParams&) { return p->checked(r, &McpHttpListener::get); });
  // One session stands for the one server behind the guard: it ends with the guard.
  l->router_.add("DELETE", "/mcp", [](const HttpRequest&, const PathParams&) {
    HttpReply r = HttpReply::error(405, "this guard's session ends when the guard does");
    r.headers.emplace_back("Allow", "GET, POST");
    return r;
  });
  auto bound = l->server_.listen_tcp(l->o_.address, l->router_.handler());
  if (!bound) {
    Error e = bound.error();
    e.message = "--listen " + l->o_.address + ": " + e.message;
    return e;
  }
  l->bound_ = *bound;
  if (auto st = l->server_.watch(l->wake_.get(), [p = l.get()] { p->drain(); }); !st) return st.error();
  return l;
}

McpHttpListener::~McpHttpListener() { server_.unwatch(wake_.get()); }

void McpHttpListener::to_client(std::string line) {
  {
    std::lock_guard lock(mu_);
    queued_.push_back(std::move(line));
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

void McpHttpListener::every(std::chrono::milliseconds period, std::function<void()> fn) {
  server_.after(period, [this, period, fn] {
    fn();
    every(period, fn);
  });
}

Status McpHttpListener::run(int stop_fd) { return server_.run(stop_fd); }

std::vector<std::pair<std::string, std::string>> McpHttpListener::session_headers() const {
  if (session_.empty()) return {};
  return {{"Mcp-Session-Id", session_}};
}

HttpReply McpHttpListener::checked(const HttpRequest& req, HttpReply (McpHttpListener::*fn)(const HttpRequest&)) {
  if (auto origin = req.header("origin"); origin && !origin_allowed(*origin, o_.allow_remote))
    return HttpReply::error(403, "Origin " + *origin + " is not a loopback origin: refused");
  return (this->*fn)(req);
}

HttpReply McpHttpListener::post(const HttpRequest& req) {
  nlohmann::json doc = nlohmann::json::parse(req.body, nullptr, false);
  if (doc.is_discarded()) {
    if (o_.log) o_.log("faultline mcp-guard: a POST body that is not JSON: answered -32700");
    return rpc_error(400, nullptr, kJsonRpcParseError, "Parse error: the body is not JSON");
  }
  const std::string line = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const McpMessage m = parse_mcp_message(line);
  if (m.kind == McpMessage::Kind::Invalid || m.kind == McpMessage::Kind::NotJson) {
    if (o_.log) o_.log("faultline mcp-guard: an invalid message from the client (" + m.problem + "): answered -32600");
    return rpc_error(400, m.id, kJsonRpcInvalidRequest, "Invalid Request: " + m.problem);
  }
  const bool initialize = m.kind == McpMessage::Kind::Request && m.method == "initialize";
  const auto given = req.header("mcp-session-id");
  if (initialize) {
    if (!session_.empty())
      return rpc_error(400, m.id, kJsonRpcInvalidRequest,
                       "Invalid Request: this guard serves one session, and it has begun (one guard per client)");
  } else if (session_.empty()) {
    return rpc_error(400, m.id, kJsonRpcInvalidRequest, "Bad Request: no session yet: initialize first");
  } else if (!given) {
    return rpc_error(400, m.id, kJsonRpcInvalidRequest, "Bad Request: Mcp-Session-Id header required");
  } else if (*given != session_) {
    return rpc_error(404, m.id, kJsonRpcInvalidRequest, "Session not found");
  }
  if (m.kind != McpMessage::Kind::Request) {
    o_.to_gate(McpLineReader::Line{line, false});
    HttpReply r;
    r.status = 202;
    r.headers = session_headers();
    return r;
  }
  const std::string key = m.id.dump();
  if (pending_.count(key) != 0)
    return rpc_error(400, m.id, kJsonRpcInvalidRequest, "Invalid Request: a request with this id is under way");
  if (initialize) session_ = random_session_id();
  pending_[key] = req.exchange;
  o_.to_gate(McpLineReader::Line{line, false});
  return HttpReply::later();
}

HttpReply McpHttpListener::get(const HttpRequest& req) {
  const auto accept = req.header("accept");
  if (!accept || accept->find("text/event-stream") == std::string::npos)
    return HttpReply::error(406, "GET /mcp is an event stream: Accept: text/event-stream");
  if (session_.empty()) return HttpReply::error(400, "no session yet: initialize first");
  const auto given = req.header("mcp-session-id");
  if (!given) return HttpReply::error(400, "Mcp-Session-Id header required");
  if (*given != session_) return HttpReply::error(404, "Session not found");
  if (stream_) return HttpReply::error(409, "the session's event stream is open already");
  const uint64_t exchange = req.exchange;
  server_.after(std::chrono::milliseconds(0), [this, exchange] { open_stream(exchange); });
  return HttpReply::later();
}

void McpHttpListener::open_stream(uint64_t exchange) {
  auto taken = server_.take_connection(exchange);
  if (!taken) return;
  UniqueFd fd = std::move(taken->fd);
  const int flags = ::fcntl(fd.get(), F_GETFL);
  (void)::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  const std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Mcp-Session-Id: " +
      session_ + "\r\nConnection: close\r\n\r\n";
  if (!write_all(fd.get(), head, "the GET stream")) return;
  stream_ = std::move(fd);
  // The client's end closing the stream: its socket reads EOF.
  (void)server_.watch(stream_.get(), [this] {
    char buf[512];
    const ssize_t n = ::recv(stream_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) close_stream();
  });
  std::vector<std::string> backlog;
  backlog.swap(backlog_);
  for (const auto& line : backlog) stream_event(line);
}

void McpHttpListener::close_stream() {
  if (!stream_) return;
  server_.unwatch(stream_.get());
  stream_.reset();
}

void McpHttpListener::stream_event(const std::string& line) {
  if (!stream_) {
    if (backlog_.size() >= kBacklog) {
      if (o_.log) o_.log("faultline mcp-guard: no GET stream open: a message for the client dropped (backlog full)");
      backlog_.erase(backlog_.begin());
    }
    backlog_.push_back(line);
    return;
  }
  if (!write_all(stream_.get(), "event: message\ndata: " + line + "\n\n", "the GET stream")) {
    close_stream();
    backlog_.push_back(line);
  }
}

void McpHttpListener::drain() {
  uint64_t n = 0;
  (void)!::read(wake_.get(), &n, sizeof n);
  std::vector<std::string> lines;
  {
    std::lock_guard lock(mu_);
    lines.swap(queued_);
  }
  for (auto& line : lines) {
    const McpMessage m = parse_mcp_message(line);
    if (m.kind == McpMessage::Kind::Response || (m.kind == McpMessage::Kind::Invalid && !m.id.is_null())) {
      auto it = pending_.find(m.id.dump());
      if (it != pending_.end()) {
        const uint64_t exchange = it->second;
        pending_.erase(it);
        if (server_.waiting(exchange)) {
          HttpReply r = HttpReply::json(200, line);
          for (auto& h : session_headers()) r.headers.push_back(std::move(h));
          server_.complete(exchange, r);
        }
        continue;
      }
    }
    stream_event(line);
  }
}

}  // namespace faultline
