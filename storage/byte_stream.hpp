// The two byte-stream interfaces every codec and store speaks, so the same
// artifact code runs over memory, files and PostgreSQL large objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvg {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to n bytes into buf and returns how many; 0 means end of data
  // (never returned for n > 0 while data remains). Short reads are allowed.
  virtual size_t read(uint8_t* buf, size_t n) = 0;
};

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Writes all n bytes or throws.
  virtual void write(const uint8_t* data, size_t n) = 0;
};

// Reads until n bytes or end of data; returns how many were read.
size_t read_fully(ByteSource& src, uint8_t* buf, size_t n);

// Non-owning view of bytes that outlive the source.
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t read(uint8_t* buf, size_t n) override;
  size_t position() const { return pos_; }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

// Appends to an owned vector.
class MemorySink final : public ByteSink {
 public:
  void write(const uint8_t* data, size_t n) override;
  std::vector<uint8_t>& bytes() { return bytes_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Keeps nothing: for an artifact's identity without its bytes (capture()
// returns the digest of what it wrote).
class DiscardSink final : public ByteSink {
 public:
  void write(const uint8_t*, size_t) override {}
};

// Reads a file from the start. Errors are Io (NotFound when it does not exist)
// and name the path.
class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;
  size_t read(uint8_t* buf, size_t n) override;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Creates or truncates a file. close() (optionally fsyncing) reports errors the
// destructor would have to swallow; call it before trusting the file.
class FileSink final : public ByteSink {
 public:
  explicit FileSink(const std::string& path);
  ~FileSink() override;
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;
  void write(const uint8_t* data, size_t n) override;
  void close(bool fsync_file = false);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace kvg
