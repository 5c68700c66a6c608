// The errno table: the codes fault injection and policies can return.
#include "base/errno_names.h"

#include <cerrno>
#include <utility>

namespace faultline {
namespace {

constexpr std::pair<const char*, int> kErrnos[] = {
    {"EPERM", EPERM},
    {"ENOENT", ENOENT},
    {"EINTR", EINTR},
    {"EIO", EIO},
    {"ENXIO", ENXIO},
    {"EBADF", EBADF},
    {"EAGAIN", EAGAIN},
    {"ENOMEM", ENOMEM},
    {"EACCES", EACCES},
    {"EFAULT", EFAULT},
    {"EBUSY", EBUSY},
    {"EEXIST", EEXIST},
    {"ENODEV", ENODEV},
    {"ENOTDIR", ENOTDIR},
    {"EISDIR", EISDIR},
    {"EINVAL", EINVAL},
    {"ENFILE", ENFILE},
    {"EMFILE", EMFILE},
    {"ETXTBSY", ETXTBSY},
    {"EFBIG", EFBIG},
    {"ENOSPC", ENOSPC},
    {"EROFS", EROFS},
    {"EPIPE", EPIPE},
    {"ENOSYS", ENOSYS},
    {"EDQUOT", EDQUOT},
    {"ENOBUFS", ENOBUFS},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EADDRINUSE", EADDRINUSE},
    {"EADDRNOTAVAIL", EADDRNOTAVAIL},
    {"ENETDOWN", ENETDOWN},
    {"ENETUNREACH", ENETUNREACH},
    {"ECONNABORTED", ECONNABORTED},
    {"ECONNRESET", ECONNRESET},
    {"ETIMEDOUT", ETIMEDOUT},
    {"ECONNREFUSED", ECONNREFUSED},
    {"EHOSTUNREACH", EHOSTUNREACH},
    {"EHOSTDOWN", EHOSTDOWN},
    {"EPROTONOSUPPORT", EPROTONOSUPPORT},
    {"ENOTCONN", ENOTCONN},
};

}  // namespace

std::optional<int> errno_from_name(const std::string& name) {
  for (const auto& [n, v] : kErrnos) {
    if (name == n) return v;
  }
  return std::nullopt;
}

std::string errno_name(int err) {
  for (const auto& [n, v] : kErrnos) {
    if (err == v) return n;
  }
  return "errno " + std::to_string(err);
}

}  // namespace faultline
