// Error handling for library code: functions that can fail on user input return
// Result<T> or Status; only main() turns an error into an exit code.
// Messages are one line, name the offending field and say how to fix it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace tessera {

enum class ErrorCode {
  invalid_argument,  // a value is out of range or inconsistent with another
  not_found,         // a file, model or GPU name that does not exist
  parse_error,       // malformed JSON or a field of the wrong type
  unsupported,       // a well-formed request we do not model (e.g. unknown model_type)
  io_error,          // reading or writing a file failed
  comm_error,        // a collective or point-to-point call failed in the transport (an MPI error)
  cancelled,         // stopped on request before it finished (a plan search the GUI was asked to cancel)
};

struct Error {
  ErrorCode code = ErrorCode::invalid_argument;
  std::string message;
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// A value or an error. C++20 has no std::expected, so this is the small subset we use.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& { return std::get<T>(state_); }
  T& value() & { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<Error>(state_); }

 private:
  std::variant<T, Error> state_;
};

// Success, or an error.
class Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status success() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

// Internal invariants (never user input, which gets a Status): always on, in
// release builds too; a broken one stops the program with file and line.
[[noreturn]] inline void check_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "tessera: internal error at %s:%d: %s (%s)\n", file, line, message, condition);
  std::abort();
}

}  // namespace tessera

#define TESSERA_CHECK(condition, message)                                          \
  do {                                                                             \
    if (!(condition)) ::tessera::check_failed(#condition, message, __FILE__, __LINE__); \
  } while (0)
