//===- Posix.h - The runtime's small POSIX helpers ------------------------===//
//
// What the cache, the tuning DB, the bundles, the compiler and the backends
// each need from the OS: a descriptor closed on scope exit, whole reads and
// writes that survive EINTR, a directory synced so a new name in it
// survives a crash, errno as text, and an environment variable that counts
// only when set and non-empty.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_POSIX_H
#define KGEN_RUNTIME_POSIX_H

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace kgen::posix {

inline std::string errnoText() { return std::strerror(errno); }

/// $name when set and non-empty, else null.
inline const char *envOrNull(const char *name) {
  const char *v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Reads exactly `n` bytes at the current offset; false on a short read
/// (errno says why, unless the file ended).
inline bool readAll(int fd, char *p, size_t n) {
  while (n) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

/// Writes all `n` bytes; false on failure (errno says why).
inline bool writeAll(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

/// fsync of directory `dir`, so that a name just linked or renamed into it
/// survives a crash, not only the file's data. Best effort.
inline void syncDir(const std::string &dir) {
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.fd >= 0)
    ::fsync(d.fd);
}

} // namespace kgen::posix

#endif // KGEN_RUNTIME_POSIX_H
