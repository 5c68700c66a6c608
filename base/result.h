// Errors as values: an errno, a message with context, and where it was raised.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <variant>

namespace faultline {

// Where an error was raised: std::source_location's two fields, from the
// builtins gcc and clang share. (clang 14 over libstdc++ 12, the fuzz build,
// has no std::source_location.) As a default argument, current() takes the
// caller's file and line.
struct SourceLocation {
  [[nodiscard]] static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                                        unsigned line = __builtin_LINE()) {
    return SourceLocation{file, line};
  }
  [[nodiscard]] constexpr const char* file_name() const { return file_; }
  [[nodiscard]] constexpr unsigned line() const { return line_; }

  const char* file_ = "";
  unsigned line_ = 0;
};

struct Error {
  int err = 0;  // errno-style code; 0 when the cause is not a system call
  std::string message;
  std::string where;  // file:line
  // The operator asked for something this system cannot be or do (a flag's value,
  // a device or namespace that is not there): exit 2, and nothing was applied.
  // Set where the input is judged, never guessed from err.
  bool bad_input = false;

  [[nodiscard]] std::string describe() const {
    std::string s = message;
    if (err != 0) s += ": " + std::string(std::strerror(err));
    return s;
  }
};

[[nodiscard]] inline Error make_error(int err, std::string message, SourceLocation loc = SourceLocation::current()) {
  std::string file = loc.file_name();
  if (auto slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
  return Error{err < 0 ? -err : err, std::move(message), file + ":" + std::to_string(loc.line())};
}

// The last errno as an Error, for a failed system call.
[[nodiscard]] inline Error errno_error(std::string message, SourceLocation loc = SourceLocation::current()) {
  return make_error(errno, std::move(message), loc);
}

// The same error, judged as bad input.
[[nodiscard]] inline Error as_bad_input(Error e) {
  e.bad_input = true;
  return e;
}

// A bad-input error raised where the input is judged.
[[nodiscard]] inline Error input_error(int err, std::string message, SourceLocation loc = SourceLocation::current()) {
  return as_bad_input(make_error(err, std::move(message), loc));
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error e) : v_(std::move(e)) {}      // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& value() const& { return std::get<T>(v_); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }
  T& operator*() & { return std::get<T>(v_); }
  const T& operator*() const& { return std::get<T>(v_); }
  T&& operator*() && { return std::get<T>(std::move(v_)); }
  [[nodiscard]] const Error& error() const { return std::get<Error>(v_); }
  // The value, or `fallback` when there is an error.
  [[nodiscard]] T value_or(T fallback) const& { return ok() ? std::get<T>(v_) : std::move(fallback); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error e) : e_(std::move(e)), failed_(true) {}  // NOLINT(google-explicit-constructor)
  [[nodiscard]] bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  [[nodiscard]] const Error& error() const { return e_; }

 private:
  Error e_;
  bool failed_ = false;
};

using Status = Result<void>;

}  // namespace faultline

// Propagate an error from an expression returning Result/Status.
#define FL_TRY(expr)                               \
  do {                                             \
    auto fl_try_r_ = (expr);                       \
    if (!fl_try_r_.ok()) return fl_try_r_.error(); \
  } while (0)
