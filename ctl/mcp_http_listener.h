// The client side of `faultctl mcp-guard --listen ADDR`: MCP's Streamable
// HTTP transport served on HttpServer at /mcp, for one session. A POSTed
// request is answered (application/json) when the guard writes its response;
// the rest of what the guard writes to the client (the server's
// notifications and requests) goes out on the session's GET event stream.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "userspace/guard/mcp_wire.h"
#include "userspace/net/http_router.h"
#include "userspace/net/http_server.h"

namespace faultline {

struct McpHttpListenerOptions {
  std::string address;                                      // HOST:PORT, port 0 for any
  bool allow_remote = false;                                // else only a loopback address may be given
  std::function<void(const McpLineReader::Line&)> to_gate;  // a message from the client
  std::function<void(const std::string&)> log;              // one line of stderr
};

class McpHttpListener {
 public:
  // Binds the address: a non-loopback one without allow_remote is bad input.
  [[nodiscard]] static Result<std::unique_ptr<McpHttpListener>> create(McpHttpListenerOptions o);
  McpHttpListener(const McpHttpListener&) = delete;
  McpHttpListener& operator=(const McpHttpListener&) = delete;
  ~McpHttpListener();

  [[nodiscard]] const std::string& address() const { return bound_; }
  // A line for the client, from any thread.
  void to_client(std::string line);
  // Runs `fn` on the serving thread every `period` (the guard's own checks).
  void every(std::chrono::milliseconds period, std::function<void()> fn);
  // Serves until stop_fd is readable.
  [[nodiscard]] Status run(int stop_fd);

 private:
  explicit McpHttpListener(McpHttpListenerOptions o, HttpServer server)
      : o_(std::move(o)), server_(std::move(server)) {}
  // The Origin check (DNS rebinding), then the route.
  HttpReply checked(const HttpRequest& req, HttpReply (McpHttpListener::*fn)(const HttpRequest&));
  HttpReply post(const HttpRequest& req);
  HttpReply get(const HttpRequest& req);
  void drain();  // the lines to_client queued, on the serving thread
  void stream_event(const std::string& line);
  void open_stream(uint64_t exchange);
  void close_stream();
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> session_headers() const;

  McpHttpListenerOptions o_;
  HttpRouter router_;  // before the server, which holds its handler
  HttpServer server_;
  std::string bound_;
  UniqueFd wake_;  // an eventfd: to_client has queued lines
  std::mutex mu_;
  std::vector<std::string> queued_;
  // Serving thread only:
  std::string session_;                      // Mcp-Session-Id, set by the answer to initialize
  std::map<std::string, uint64_t> pending_;  // a request's id (dumped) -> its POST's exchange
  UniqueFd stream_;                          // the GET event stream, when open
  std::vector<std::string> backlog_;         // for the stream, while none is open
};

}  // namespace faultline
