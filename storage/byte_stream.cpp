#include "storage/byte_stream.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include "common/error.hpp"

namespace kvg {

namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(err == ENOENT ? ErrorCode::NotFound : ErrorCode::Io,
              what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

size_t read_fully(ByteSource& src, uint8_t* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    size_t r = src.read(buf + got, n - got);
    if (r == 0) break;
    got += r;
  }
  return got;
}

size_t MemorySource::read(uint8_t* buf, size_t n) {
  size_t r = std::min(n, bytes_.size() - pos_);
  if (r > 0) std::memcpy(buf, bytes_.data() + pos_, r);
  pos_ += r;
  return r;
}

void MemorySink::write(const uint8_t* data, size_t n) { bytes_.insert(bytes_.end(), data, data + n); }

FileSource::FileSource(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) io_error("cannot open", path_, errno);
#ifdef POSIX_FADV_SEQUENTIAL
  // Artifacts are read front to back once; let the kernel read ahead further.
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
}

FileSource::~FileSource() {
  if (fd_ >= 0) ::close(fd_);
}

size_t FileSource::read(uint8_t* buf, size_t n) {
  for (;;) {
    ssize_t r = ::read(fd_, buf, n);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno != EINTR) io_error("cannot read", path_, errno);
  }
}

FileSink::FileSink(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) io_error("cannot create", path_, errno);
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
}

void FileSink::write(const uint8_t* data, size_t n) {
  if (fd_ < 0) throw Error(ErrorCode::Internal, "write to closed file '" + path_ + "'");
  while (n > 0) {
    ssize_t w = ::write(fd_, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      io_error("cannot write", path_, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void FileSink::close(bool fsync_file) {
  if (fd_ < 0) return;
  int fd = fd_;
  fd_ = -1;
  if (fsync_file && ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    io_error("cannot fsync", path_, err);
  }
  // close() can report a deferred write error (e.g. NFS, quota).
  if (::close(fd) != 0 && errno != EINTR) io_error("cannot close", path_, errno);
}

}  // namespace kvg
