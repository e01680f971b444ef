#include "storage/file_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/error.hpp"

namespace kvg {

namespace fs = std::filesystem;

namespace {

// Big enough to amortise syscalls, small enough to stay in L2/L3 between the
// hash and the write.
constexpr size_t kCopyChunk = size_t{1} << 20;
constexpr const char* kSuffix = ".kvga";
constexpr const char* kTempPrefix = ".tmp-";

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorCode::Io, what + " '" + path + "': " + std::strerror(err));
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_error("cannot open directory", dir, errno);
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    io_error("cannot fsync directory", dir, err);
  }
  ::close(fd);
}

void write_all(int fd, const uint8_t* data, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      io_error("cannot write", path, errno);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
}

// Owns a temp file until it is renamed into place; removes it on any failure
// so an exception never leaves a temp behind.
class TempFile {
 public:
  explicit TempFile(const std::string& dir) {
    std::string tmpl = dir + "/" + kTempPrefix + "XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    fd_ = ::mkostemp(buf.data(), O_CLOEXEC);
    if (fd_ < 0) io_error("cannot create temp file in", dir, errno);
    path_ = buf.data();
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Durable and closed; errors reported here rather than lost in a destructor.
  void seal() {
    // mkostemp creates 0600; objects are shared with other readers (the CLI,
    // the server) like any file the store's owner writes.
    if (::fchmod(fd_, 0644) != 0) io_error("cannot chmod", path_, errno);
    if (::fsync(fd_) != 0) io_error("cannot fsync", path_, errno);
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && errno != EINTR) io_error("cannot close", path_, errno);
  }
  void release() { path_.clear(); }  // renamed: nothing left to remove

 private:
  int fd_ = -1;
  std::string path_;
};

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(ErrorCode::Io, "cannot create store directory '" + dir_ + "': " + ec.message());
  if (!fs::is_directory(dir_, ec)) throw Error(ErrorCode::Io, "store path '" + dir_ + "' is not a directory");
}

std::string FileStore::path_of(const Digest& id) const {
  std::string hex = to_hex(id);
  return dir_ + "/" + hex.substr(0, 2) + "/" + hex + kSuffix;
}

Digest FileStore::put(ByteSource& src) {
  // The temp lives in <dir> (same filesystem as every <dir>/xx/), because the
  // subdirectory is known only once the content is hashed.
  TempFile tmp(dir_);
  Sha256 sha;
  uint64_t size = 0;
  std::vector<uint8_t> buf(kCopyChunk);
  for (;;) {
    size_t r = src.read(buf.data(), buf.size());
    if (r == 0) break;
    sha.update(buf.data(), r);
    write_all(tmp.fd(), buf.data(), r, tmp.path());
    size += r;
  }
  tmp.seal();
  const Digest id = sha.finish();
  const std::string hex = to_hex(id);
  const std::string sub = dir_ + "/" + hex.substr(0, 2);
  const std::string final_path = path_of(id);

  if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) io_error("cannot create directory", sub, errno);
  // Another writer may have created the subdirectory and not yet made it
  // durable; syncing the parent ourselves costs little and closes that gap.
  fsync_dir(dir_);

  struct stat st;
  if (::stat(final_path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == size) {
    // Same name means same content (SHA-256); keep the existing object. A
    // wrong-sized one is damaged, so it is replaced below instead. Its writer
    // may not have synced the directory yet, and we are about to promise
    // durability too.
    fsync_dir(sub);
    return id;  // ~TempFile removes the temp
  }
  // rename() is atomic: concurrent writers of the same content each replace
  // the name with an identical, complete file; readers see one or the other.
  if (::rename(tmp.path().c_str(), final_path.c_str()) != 0) io_error("cannot rename into", final_path, errno);
  tmp.release();
  fsync_dir(sub);
  return id;
}

std::unique_ptr<ByteSource> FileStore::get_unverified(const Digest& id) {
  try {
    return std::make_unique<FileSource>(path_of(id));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::NotFound)
      throw Error(ErrorCode::NotFound, "artifact " + to_hex(id) + " not found in store '" + dir_ + "'");
    throw;
  }
}

std::unique_ptr<ByteSource> FileStore::get(const Digest& id) {
  return std::make_unique<HashVerifyingSource>(get_unverified(id), id, "artifact file '" + path_of(id) + "'");
}

bool FileStore::exists(const Digest& id) {
  const std::string path = path_of(id);
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) return S_ISREG(st.st_mode);
  if (errno == ENOENT || errno == ENOTDIR) return false;
  io_error("cannot stat", path, errno);
}

std::vector<Digest> FileStore::list() {
  std::vector<Digest> out;
  std::error_code ec;
  for (fs::directory_iterator sub(dir_, ec), end; !ec && sub != end; sub.increment(ec)) {
    const std::string prefix = sub->path().filename().string();
    std::error_code ec2;
    if (prefix.size() != 2 || !is_lower_hex(prefix) || !sub->is_directory(ec2)) continue;
    for (fs::directory_iterator f(sub->path(), ec2), fend; !ec2 && f != fend; f.increment(ec2)) {
      const std::string name = f->path().filename().string();
      if (name.size() != 64 + std::strlen(kSuffix) || !name.ends_with(kSuffix)) continue;
      std::string_view hex(name.data(), 64);
      if (!is_lower_hex(hex) || hex.substr(0, 2) != prefix) continue;
      if (auto d = digest_from_hex(hex)) out.push_back(*d);
    }
    if (ec2) throw Error(ErrorCode::Io, "cannot list '" + sub->path().string() + "': " + ec2.message());
  }
  if (ec) throw Error(ErrorCode::Io, "cannot list store '" + dir_ + "': " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace kvg
