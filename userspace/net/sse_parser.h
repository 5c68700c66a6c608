// Server-sent events (the WHATWG event-stream format) as a client reads them:
// bytes in any pieces, events out. Untrusted bytes (a remote MCP server's
// stream): an event's data is bounded, fuzzed in selftests/fuzz/mcp_wire_fuzz.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

struct SseEvent {
  std::string type = "message";  // the "event:" field, "message" when none was given
  std::string data;              // the "data:" lines joined with "\n"
  std::string id;                // the "id:" field of this event, if any
};

// Lines end with "\r\n", "\n" or "\r"; "field: value" lines (one space after
// the colon dropped), ":" comments ignored, a blank line dispatches the
// event (one with no data line is dropped, as browsers do). An event whose
// data would exceed max_event is dropped whole and counted in oversized().
class SseParser {
 public:
  explicit SseParser(size_t max_event) : max_(max_event) {}
  [[nodiscard]] std::vector<SseEvent> feed(std::string_view bytes);
  [[nodiscard]] size_t oversized() const { return oversized_; }

 private:
  void line(std::string_view l, std::vector<SseEvent>& out);
  std::string buf_;         // a line not yet ended
  bool after_cr_ = false;   // the last byte was '\r': a '\n' right after it ends nothing more
  bool dropping_ = false;   // inside an oversized event, until its blank line
  bool skip_line_ = false;  // inside a line too long to keep, until its end
  bool has_data_ = false;
  SseEvent event_;
  size_t max_;
  size_t oversized_ = 0;
};

}  // namespace faultline
