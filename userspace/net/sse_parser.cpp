// The event-stream format, line by line, with a bound on each event's size.
#include "userspace/net/sse_parser.h"

namespace faultline {

void SseParser::line(std::string_view l, std::vector<SseEvent>& out) {
  if (l.empty()) {
    if (!dropping_ && has_data_) out.push_back(std::move(event_));
    event_ = SseEvent{};
    has_data_ = false;
    dropping_ = false;
    return;
  }
  if (dropping_ || l.front() == ':') return;
  const size_t colon = l.find(':');
  const std::string_view field = l.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : l.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (event_.data.size() + value.size() + 1 > max_) {
      dropping_ = true;
      ++oversized_;
      event_ = SseEvent{};
      has_data_ = false;
      return;
    }
    if (has_data_) event_.data += '\n';
    event_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_.type = value.empty() ? "message" : std::string(value.substr(0, 256));
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) event_.id = std::string(value.substr(0, 256));
  }
  // "retry" and unknown fields: ignored.
}

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  for (size_t i = 0; i < bytes.size();) {
    if (after_cr_ && bytes[i] == '\n') {
      after_cr_ = false;
      ++i;
      continue;
    }
    after_cr_ = false;
    const size_t end = bytes.find_first_of("\r\n", i);
    const std::string_view part = bytes.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
    if (!skip_line_ && buf_.size() + part.size() > max_ + 64) {
      // A line longer than an event may be: the event is dropped, and the
      // rest of this line skipped (its end is no blank line).
      if (!dropping_) ++oversized_;
      dropping_ = true;
      skip_line_ = true;
      event_ = SseEvent{};
      has_data_ = false;
      buf_.clear();
    }
    if (end == std::string_view::npos) {
      if (!skip_line_) buf_.append(part);
      break;
    }
    if (skip_line_) {
      skip_line_ = false;
    } else if (buf_.empty()) {
      line(part, out);
    } else {
      buf_.append(part);
      line(buf_, out);
      buf_.clear();
    }
    after_cr_ = bytes[end] == '\r';
    i = end + 1;
  }
  return out;
}

}  // namespace faultline
