// The remote side of `faultctl mcp-guard --upstream-url`: an MCP server over
// Streamable HTTP (a POST per message, answers as JSON or an event stream,
// the server's own messages on a GET stream) or the older HTTP+SSE transport
// (one event stream, messages POSTed to the endpoint it names). libcurl does
// HTTP and TLS; the guard hands lines in and gets the server's lines back.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "userspace/guard/mcp_wire.h"

namespace faultline {

enum class McpUpstreamTransport { Streamable, Sse };

struct McpHttpUpstreamOptions {
  std::string url;
  McpUpstreamTransport transport = McpUpstreamTransport::Streamable;
  // "Name: value" lines sent with every request, variables already expanded:
  // secrets, never logged.
  std::vector<std::string> headers;
  // A message from the server (or the guard's own error for a request the
  // server could not be asked): called from the upstream's threads.
  std::function<void(const McpLineReader::Line&)> on_message;
  std::function<void(const std::string&)> log;  // one line of stderr
  // How long the SSE transport waits for its endpoint at the start.
  std::chrono::milliseconds connect_timeout{30'000};
};

class McpHttpUpstream {
 public:
  // Streamable: checks nothing yet (the first POST is the client's
  // initialize). SSE: opens the event stream and waits for its endpoint; an
  // upstream that does not answer is an error here.
  [[nodiscard]] static Result<std::unique_ptr<McpHttpUpstream>> start(McpHttpUpstreamOptions o);
  ~McpHttpUpstream();  // stop()
  McpHttpUpstream(const McpHttpUpstream&) = delete;
  McpHttpUpstream& operator=(const McpHttpUpstream&) = delete;

  // One message to the server, in order; thread-safe, never blocks on the network.
  void send(std::string line);
  // Ends every transfer; with a Streamable HTTP session, DELETEs it.
  void stop();
  // The SSE transport's stream ended (the server is gone): the guard ends too.
  [[nodiscard]] bool gone() const { return gone_.load(); }

  struct Transfer;  // one HTTP exchange (mcp_http_upstream.cpp)

 private:
  explicit McpHttpUpstream(McpHttpUpstreamOptions o) : o_(std::move(o)) {}
  void sender_loop();
  void post(const std::string& line);
  void sse_reader();
  void streamable_get_loop();
  // The guard's answer to a request the server could not be asked.
  void fail_request(const McpMessage& m, const std::string& why);
  [[nodiscard]] std::vector<std::string> request_headers(bool event_stream_only) const;
  void deliver(std::string data);

  McpHttpUpstreamOptions o_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> gone_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::string session_id_;        // Mcp-Session-Id, from the server's answer to initialize
  std::string protocol_version_;  // from the initialize result
  std::string endpoint_;          // SSE: where messages go
  bool endpoint_failed_ = false;
  bool get_started_ = false;
  std::thread sender_, reader_;
  std::vector<std::thread> requests_;
};

// "${NAME}" in a header value replaced from the environment; an unset or
// empty NAME is an error naming it (never the value).
[[nodiscard]] Result<std::string> expand_header_env(const std::string& header);

}  // namespace faultline
