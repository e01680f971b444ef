// A file's identity as the kernel reports it (device, inode, size, times of
// modification and of status change): two equal identities are, in
// practice, the same unchanged bytes. Whoever trusts a file's contents on
// the strength of an earlier check keeps its identity and compares (the
// model fingerprints, the engine worker's KV files). A write in place moves
// both times; only the status-change time cannot be set back by a user.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace kvg {

struct FileIdentity {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

inline FileIdentity identity_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size, int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
          int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec};
}

// The identity of the file open as `fd`, or of the one at `path`; nothing
// when it cannot be had (gone, unreadable).
inline std::optional<FileIdentity> identity_of_fd(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return identity_of(st);
}
inline std::optional<FileIdentity> identity_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return identity_of(st);
}

}  // namespace kvg
