// Lines written to a file descriptor by a thread of their own, so the caller
// never waits on whoever reads it: a foreground faultd logs each API request to
// its stderr, and a pipe nobody reads must not stall the API. At most
// `capacity` lines wait; beyond that a line is dropped and counted, and the
// count is written as a line of its own once the writer catches up.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace faultline {

class LineWriter {
 public:
  // A writer for fd that lives as long as the process (its thread may be
  // blocked in write() when the process exits, so it is never destroyed).
  // The count of dropped lines is written as "WHO: N log lines dropped ...".
  static LineWriter& open(int fd, size_t capacity, std::string who);

  // Queues line (a newline is added); never waits on fd.
  void post(std::string line);

  // Waits up to `within` for every queued line to be written; false if some
  // are still waiting (the reader is gone or slow).
  bool drain(std::chrono::milliseconds within);

  // Lines dropped so far because `capacity` were waiting.
  [[nodiscard]] size_t dropped() const;

  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

 private:
  struct State;
  explicit LineWriter(State* s) : s_(s) {}
  State* s_;
};

}  // namespace faultline
