#include "extension/src/model/model_fingerprints.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.hpp"
#include "extension/src/pg/shared_struct.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
}

namespace kvg::pg::model_fingerprints {

namespace {

constexpr int kEntries = 32;  // model files one server keeps apart; the oldest is forgotten first
constexpr const char* kTranche = "kvg_model_fingerprints";

struct Entry {
  FileIdentity file;
  std::array<uint8_t, 32> fingerprint;
  uint64_t stamp;  // 0: empty; larger: more recently remembered
};

struct Table {
  LWLock* lock;
  uint64_t clock;
  Entry entries[kEntries];
};

Table* table = nullptr;

const SharedStruct kSharedMemory{
    "kvg model fingerprints", kTranche, [] { return sizeof(Table); },
    [](void* memory, LWLock* lock) { static_cast<Table*>(memory)->lock = lock; }, reinterpret_cast<void**>(&table)};

// A model file's identity without its status-change time: replacing a model
// with mv unlinks the old file, which moves the old file's ctime, and the
// engine worker must still find that file unchanged for the callers that
// mapped it before the replacement (HeldFile).
FileIdentity model_identity(const struct stat& st) {
  FileIdentity identity = identity_of(st);
  identity.ctime_ns = 0;
  return identity;
}

}  // namespace

FileIdentity identify(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw Error(errno == ENOENT ? ErrorCode::NotFound : ErrorCode::Io,
                "kvg.model: cannot access '" + path + "': " + strerror(errno));
  if (S_ISDIR(st.st_mode))
    throw Error(ErrorCode::InvalidArgument, "kvg.model: '" + path + "' is a directory, not a GGUF model file");
  return model_identity(st);
}

HeldFile::HeldFile(const std::string& path, const FileIdentity& file) : file_(file) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ >= 0 && !unchanged()) {
    ::close(fd_);
    fd_ = -1;
  }
}

HeldFile::~HeldFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool HeldFile::unchanged() const {
  struct stat st;
  return fd_ >= 0 && ::fstat(fd_, &st) == 0 && model_identity(st) == file_;
}

void setup_at_preload() { request_shared_struct(kSharedMemory); }

std::optional<std::array<uint8_t, 32>> find(const FileIdentity& file) {
  if (!table) return std::nullopt;
  std::optional<std::array<uint8_t, 32>> found;
  LWLockAcquire(table->lock, LW_SHARED);
  for (const Entry& e : table->entries)
    if (e.stamp != 0 && e.file == file) found = e.fingerprint;
  LWLockRelease(table->lock);
  return found;
}

void remember(const FileIdentity& file, const std::array<uint8_t, 32>& fingerprint) {
  if (!table) return;
  LWLockAcquire(table->lock, LW_EXCLUSIVE);
  Entry* slot = nullptr;
  for (Entry& e : table->entries)
    if (e.stamp != 0 && e.file == file) slot = &e;
  if (!slot) {  // an empty entry (stamp 0) or else the least recently remembered
    slot = &table->entries[0];
    for (Entry& e : table->entries)
      if (e.stamp < slot->stamp) slot = &e;
  }
  *slot = Entry{file, fingerprint, ++table->clock};
  LWLockRelease(table->lock);
}

std::shared_ptr<const Model> load(const std::string& path, const FileIdentity& file, ModelUse use) {
  const std::optional<std::array<uint8_t, 32>> known = find(file);
  auto model = use == ModelUse::Compute ? Model::load(path, known) : Model::load_without_weights(path, known);
  if (!known && identify(path) == file) remember(file, model->fingerprint());
  // Said at DEBUG1 (which never leaves this frame): tests/concurrency/engine_worker_test.sh reads it.
  const std::string said = "kvg: model fingerprint of '" + path + (known ? "' remembered" : "' computed");
  elog(DEBUG1, "%s", said.c_str());
  return model;
}

std::shared_ptr<const Model> load_setting(const std::string& path, const FileIdentity& file, ModelUse use) {
  try {
    return load(path, file, use);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Corrupt) throw;
    throw Error(ErrorCode::InvalidArgument, "kvg.model: '" + path + "' is not a GGUF model file (" + e.what() +
                                                "); a superuser sets kvg.model to the path of one");
  }
}

HeldModel load_held(const std::string& path, ModelUse use) {
  constexpr int kLoads = 3;
  for (int i = 0; i < kLoads; ++i) {
    const FileIdentity file = identify(path);
    auto held = std::make_shared<HeldFile>(path, file);
    auto model = load_setting(path, file, use);
    if (held->unchanged() && identify(path) == file) return {file, std::move(model), std::move(held)};
  }
  throw Error(ErrorCode::ModelMismatch, "kvg.model '" + path + "' was replaced by another file during each of " +
                                            std::to_string(kLoads) + " loads: call again");
}

std::optional<HeldModel> load_held_by(pid_t pid, int fd, const FileIdentity& file, ModelUse use) {
  if (pid <= 0 || fd < 0) return std::nullopt;
  auto held = std::make_shared<HeldFile>("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd), file);
  if (!held->unchanged()) return std::nullopt;
  // Loaded through the descriptor held here: the holder may close its own.
  auto model = load_setting("/proc/self/fd/" + std::to_string(held->fd()), file, use);
  return HeldModel{file, std::move(model), std::move(held)};
}

}  // namespace kvg::pg::model_fingerprints
