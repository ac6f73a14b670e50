//===- Status.h - errors of the runtime --------------------------*- C++ -*-===//
//
// The runtime reports every problem as a Status carrying a message a user can
// act on (what, where, what to do); tools print it and exit non-zero.
//
//===----------------------------------------------------------------------===//
#ifndef ZRT_SUPPORT_STATUS_H
#define ZRT_SUPPORT_STATUS_H

#include <sstream>
#include <string>
#include <utility>

namespace zrt {

class Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

/// Builds a message from streamable parts: errorf("buffer ", i, " is bad").
template <typename... Args> Status errorf(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return Status::error(os.str());
}

} // namespace zrt

#define ZRT_RETURN_IF_ERROR(expr)                                                                  \
  do {                                                                                             \
    ::zrt::Status _status = (expr);                                                                \
    if (!_status)                                                                                  \
      return _status;                                                                              \
  } while (0)

#endif // ZRT_SUPPORT_STATUS_H
