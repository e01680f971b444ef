// FileStore: content addressing, dedup, verification on read, and concurrent
// writers (threads and processes) of the same content.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"
#include "storage/file_store.hpp"
#include "tests/support/data_paths.hpp"

namespace kvg {
namespace {

namespace fs = std::filesystem;

// test::temp_dir leaves its directory behind and these tests write megabytes.
struct ScratchDir {
  explicit ScratchDir(const std::string& name) : path(test::temp_dir(name)) {}
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return out;
}

std::vector<uint8_t> read_to_end(ByteSource& src) {
  std::vector<uint8_t> out;
  uint8_t buf[65536];
  while (size_t n = src.read(buf, sizeof buf)) out.insert(out.end(), buf, buf + n);
  return out;
}

Digest put_bytes(ArtifactStore& store, const std::vector<uint8_t>& bytes) {
  MemorySource src(bytes);
  return store.put(src);
}

// Every regular file under the store, relative names.
std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

size_t temp_files_in(const std::string& dir) {
  size_t n = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0) ++n;
  return n;
}

TEST(FileStore, RoundTripAndLayout) {
  ScratchDir scratch("fs-roundtrip");
  FileStore store(scratch.path);
  std::vector<uint8_t> bytes = pattern(3 << 20 | 17, 1);  // several copy chunks plus a tail
  Digest id = put_bytes(store, bytes);
  EXPECT_EQ(id, sha256(bytes));
  std::string hex = to_hex(id);
  EXPECT_EQ(store.path_of(id), store.dir() + "/" + hex.substr(0, 2) + "/" + hex + ".kvga");
  EXPECT_TRUE(fs::is_regular_file(store.path_of(id)));
  EXPECT_EQ(fs::file_size(store.path_of(id)), bytes.size());
  auto src = store.get(id);
  EXPECT_EQ(read_to_end(*src), bytes);
  EXPECT_EQ(src->read(nullptr, 0), 0u);
  EXPECT_EQ(temp_files_in(store.dir()), 0u);
}

TEST(FileStore, ArtifactThroughStore) {
  ArtifactHeader h;
  h.model_fingerprint = sha256(std::string_view("m"));
  h.recipe = "f32-portable-v1";
  h.n_layer = 2, h.n_head_kv = 1, h.head_dim = 4;
  h.tokens = {9, 8, 7};
  h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  MemorySink sink;
  ArtifactWriter w(h, sink);
  std::vector<float> K(h.block_floats(), 1.5f), V(h.block_floats(), -2.5f);
  for (uint32_t l = 0; l < h.n_layer; ++l) w.write_layer(l, K.data(), V.data());
  Digest identity = w.finish();

  ScratchDir scratch("fs-artifact");
  FileStore store(scratch.path);
  EXPECT_EQ(put_bytes(store, sink.bytes()), identity);  // store name == artifact identity
  auto src = store.get(identity);
  EXPECT_EQ(verify_artifact(*src).identity, identity);
}

TEST(FileStore, ExistsAndList) {
  ScratchDir scratch("fs-list");
  FileStore store(scratch.path);
  EXPECT_TRUE(store.list().empty());
  std::vector<Digest> ids;
  for (uint32_t i = 0; i < 5; ++i) ids.push_back(put_bytes(store, pattern(1000 + i, i)));
  ids.push_back(put_bytes(store, {}));  // empty content is content too
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(store.list(), ids);
  for (const Digest& id : ids) EXPECT_TRUE(store.exists(id));
  EXPECT_FALSE(store.exists(sha256(std::string_view("never stored"))));
  // Junk next to the objects is not listed.
  std::ofstream(store.dir() + "/.tmp-leftover") << "x";
  std::ofstream(store.dir() + "/notes.txt") << "x";
  fs::create_directories(store.dir() + "/zz");
  std::ofstream(store.dir() + "/zz/" + std::string(64, 'z') + ".kvga") << "x";
  std::string misplaced = to_hex(sha256(std::string_view("misplaced")));
  std::ofstream(store.dir() + "/" + to_hex(ids[0]).substr(0, 2) + "/" + misplaced + ".kvga") << "x";
  EXPECT_EQ(store.list(), ids);
}

TEST(FileStore, IdenticalContentIsStoredOnce) {
  ScratchDir scratch("fs-dedup");
  FileStore store(scratch.path);
  std::vector<uint8_t> bytes = pattern(100000, 7);
  Digest a = put_bytes(store, bytes);
  Digest b = put_bytes(store, bytes);
  EXPECT_EQ(a, b);
  std::string hex = to_hex(a);
  EXPECT_EQ(files_in(store.dir()), std::vector<std::string>{hex.substr(0, 2) + "/" + hex + ".kvga"});
}

TEST(FileStore, CorruptedFileIsDetectedOnRead) {
  ScratchDir scratch("fs-corrupt");
  FileStore store(scratch.path);
  std::vector<uint8_t> bytes = pattern(200000, 3);
  Digest id = put_bytes(store, bytes);
  {
    std::fstream f(store.path_of(id), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(123456);
    f.put(static_cast<char>(bytes[123456] ^ 0x10));
  }
  auto src = store.get(id);
  try {
    read_to_end(*src);
    FAIL() << "flipped bit not detected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Corrupt);
    EXPECT_NE(std::string(e.what()).find("failed verification"), std::string::npos) << e.what();
  }
  // The failure is sticky: no later read reports a clean end.
  uint8_t b;
  EXPECT_THROW(src->read(&b, 1), Error);

  // Truncation on disk too.
  fs::resize_file(store.path_of(id), 1000);
  auto cut = store.get(id);
  EXPECT_THROW(read_to_end(*cut), Error);
}

// get_unverified hands back the bytes as stored — damaged ones included — for
// readers that check the identity themselves; it still knows what is absent.
TEST(FileStore, GetUnverifiedReturnsTheStoredBytesUnchecked) {
  ScratchDir scratch("fs-unverified");
  FileStore store(scratch.path);
  std::vector<uint8_t> bytes = pattern(70000, 5);
  Digest id = put_bytes(store, bytes);
  EXPECT_EQ(read_to_end(*store.get_unverified(id)), bytes);
  {
    std::fstream f(store.path_of(id), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put(static_cast<char>(bytes[100] ^ 0x01));
  }
  bytes[100] ^= 0x01;
  EXPECT_EQ(read_to_end(*store.get_unverified(id)), bytes);
  EXPECT_THROW(read_to_end(*store.get(id)), Error);
  try {
    store.get_unverified(sha256(std::string_view("absent")));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NotFound);
  }
}

TEST(FileStore, PutReplacesAWrongSizedObject) {
  ScratchDir scratch("fs-repair");
  FileStore store(scratch.path);
  std::vector<uint8_t> bytes = pattern(5000, 4);
  Digest id = put_bytes(store, bytes);
  fs::resize_file(store.path_of(id), 10);
  EXPECT_EQ(put_bytes(store, bytes), id);
  auto src = store.get(id);
  EXPECT_EQ(read_to_end(*src), bytes);
}

TEST(FileStore, MissingIsNotFound) {
  ScratchDir scratch("fs-missing");
  FileStore store(scratch.path);
  Digest id = sha256(std::string_view("absent"));
  try {
    store.get(id);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::NotFound);
    EXPECT_NE(std::string(e.what()).find(to_hex(id)), std::string::npos);
  }
  EXPECT_FALSE(store.exists(id));
}

class FailingSource final : public ByteSource {
 public:
  size_t read(uint8_t* buf, size_t n) override {
    if (calls_++ == 3) throw Error(ErrorCode::Io, "source died");
    std::memset(buf, 'x', n);
    return n;
  }

 private:
  int calls_ = 0;
};

TEST(FileStore, FailedPutLeavesNothingBehind) {
  ScratchDir scratch("fs-failed");
  FileStore store(scratch.path);
  FailingSource src;
  EXPECT_THROW(store.put(src), Error);
  EXPECT_TRUE(files_in(store.dir()).empty());
  EXPECT_TRUE(store.list().empty());
}

// 0: put failed with Io; 1: put succeeded; 2: another error.
int put_status(FileStore& store) {
  MemorySource src(std::span<const uint8_t>{});
  try {
    store.put(src);
    return 1;
  } catch (const Error& e) {
    return e.code() == ErrorCode::Io ? 0 : 2;
  }
}

TEST(FileStore, UnwritableDirectoryIsIo) {
  ScratchDir scratch("fs-readonly");
  const std::string& dir = scratch.path;
  FileStore store(dir);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  if (::geteuid() != 0) {
    EXPECT_EQ(put_status(store), 0);
  } else {
    // Root ignores directory permissions: try as `nobody` in a child (the
    // directory is then unwritable to it, whether or not it can reach it).
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
      _exit(put_status(store));
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the put succeeded, 2: not an Io error, 3: could not become nobody";
  }
  fs::permissions(dir, fs::perms::owner_all);
}

TEST(FileStore, StorePathThatIsAFileIsIo) {
  ScratchDir scratch("fs-notdir");
  std::string file = scratch.path + "/plain-file";
  std::ofstream(file) << "x";
  try {
    FileStore store(file);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io) << e.what();
  }
}

// All writers hold the same bytes; every one must return the same id and the
// store must end with exactly one intact object and no temp files.
void expect_single_intact(FileStore& store, const std::vector<uint8_t>& bytes) {
  Digest id = sha256(bytes);
  std::string hex = to_hex(id);
  EXPECT_EQ(files_in(store.dir()), std::vector<std::string>{hex.substr(0, 2) + "/" + hex + ".kvga"});
  EXPECT_EQ(temp_files_in(store.dir()), 0u);
  auto src = store.get(id);
  EXPECT_EQ(read_to_end(*src), bytes);
}

TEST(FileStore, ConcurrentWritersFromThreads) {
  ScratchDir scratch("fs-threads");
  FileStore store(scratch.path);
  const std::vector<uint8_t> bytes = pattern(6 << 20, 11);
  const Digest expected = sha256(bytes);
  std::vector<Digest> got(8);
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      try {
        FileStore own(store.dir());  // as separate callers would
        got[t] = put_bytes(own, bytes);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(errors[t], "") << t;
    EXPECT_EQ(got[t], expected) << t;
  }
  expect_single_intact(store, bytes);
}

TEST(FileStore, ConcurrentWritersFromProcesses) {
  ScratchDir scratch("fs-procs");
  FileStore store(scratch.path);
  const std::vector<uint8_t> bytes = pattern(6 << 20, 12);
  const Digest expected = sha256(bytes);
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      (void)!::read(gate[0], &c, 1);  // returns 0 when the parent opens the gate
      int status = 3;
      try {
        FileStore own(store.dir());
        status = put_bytes(own, bytes) == expected ? 0 : 1;
      } catch (...) {
        status = 2;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // release all children at once
  for (pid_t pid : children) {
    int status = -1;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  expect_single_intact(store, bytes);
}

TEST(HashVerifyingSource, PassesMatchingContentAndEndsCleanly) {
  std::vector<uint8_t> bytes = pattern(1000, 5);
  MemorySource inner(bytes);
  HashVerifyingSource src(inner, sha256(bytes));
  EXPECT_EQ(read_to_end(src), bytes);
  EXPECT_EQ(src.bytes_read(), bytes.size());
  uint8_t b;
  EXPECT_EQ(src.read(&b, 1), 0u);
}

TEST(HashVerifyingSource, MismatchThrowsAtEndAndStaysFailed) {
  std::vector<uint8_t> bytes = pattern(1000, 5);
  HashVerifyingSource src(std::make_unique<MemorySource>(bytes), sha256(std::string_view("other")), "test object");
  uint8_t buf[600];
  EXPECT_EQ(src.read(buf, sizeof buf), 600u);  // data flows; the verdict comes at the end
  EXPECT_EQ(src.read(buf, sizeof buf), 400u);
  try {
    src.read(buf, sizeof buf);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Corrupt);
    EXPECT_EQ(std::string(e.what()).rfind("test object ", 0), 0u) << e.what();
  }
  EXPECT_THROW(src.read(buf, 1), Error);
}

}  // namespace
}  // namespace kvg
