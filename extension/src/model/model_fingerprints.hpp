// The models' fingerprints, remembered for the whole server: a model's
// fingerprint is the SHA-256 of its file, and computing it reads every byte
// (a second or more for a 1 GB model). The first process that loads a file
// records its fingerprint here under the file's identity
// (common/file_identity.hpp, without the status-change time, which moves when
// a replaced file is unlinked: what engine_context.cpp already trusts to decide
// that a loaded model is still current); every later load of the same file,
// in any backend or the engine worker, takes it from here. A file replaced
// or rewritten gets a new identity and is hashed again.
#pragma once

#include <array>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>

#include "common/file_identity.hpp"
#include "engine/model.hpp"

namespace kvg::pg::model_fingerprints {

using kvg::FileIdentity;

// The identity of the file at `path`; NotFound, Io or InvalidArgument (a
// directory) naming kvg.model otherwise.
FileIdentity identify(const std::string& path);

// A file held open, to tell later whether it is still as identified, also
// once another file was renamed over its path (the engine worker keeps the
// models its callers mapped before such a rename).
class HeldFile {
 public:
  // Opens `path`; holds nothing when the file there is not `file` any more.
  HeldFile(const std::string& path, const FileIdentity& file);
  ~HeldFile();
  HeldFile(const HeldFile&) = delete;
  HeldFile& operator=(const HeldFile&) = delete;
  // Whether the file held has kept the identity it was opened with (its
  // size and modification time: not cut short or rewritten in place).
  bool unchanged() const;
  // The descriptor it is held by (-1: none); the engine worker opens the
  // same file through /proc/<pid>/fd/<fd> of the backend holding it.
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  FileIdentity file_;
};

// From _PG_init under shared_preload_libraries: the table's shared memory.
// Without it nothing is remembered (every load hashes).
void setup_at_preload();

std::optional<std::array<uint8_t, 32>> find(const FileIdentity& file);
void remember(const FileIdentity& file, const std::array<uint8_t, 32>& fingerprint);

// What a process does with a model: computes with it (its weights mapped),
// or only prepares calls that compute elsewhere (tokenizes, checks sizes,
// names the model: Model::load_without_weights, nothing left mapped).
enum class ModelUse { Compute, Prepare };

// The model at `path` (whose identity is `file`), its fingerprint taken from
// the table when known, else computed and remembered — only if the file is
// still the one identified (not replaced while it was loaded).
std::shared_ptr<const Model> load(const std::string& path, const FileIdentity& file, ModelUse use);

// load(), where the file is kvg.model's: bytes that do not parse as a GGUF
// model are a wrong setting (22023: InvalidArgument naming the file), not a
// damaged artifact. Backends and the engine worker load with it alike.
std::shared_ptr<const Model> load_setting(const std::string& path, const FileIdentity& file, ModelUse use);

// A model with the file it was loaded from, held open for as long as it is
// kept: a backend's (whose calls the engine worker may serve from that very
// file after another was renamed over the path) or the worker's own.
struct HeldModel {
  FileIdentity file;
  std::shared_ptr<const Model> model;
  std::shared_ptr<HeldFile> held;
};

// load_setting() of the file at `path`, held open from before the load and
// still at the path after it: so the bytes loaded are the file identified,
// and the fingerprint remembered for its identity is theirs (a file renamed
// over the path meanwhile is loaded again; three times: ModelMismatch,
// "call again").
HeldModel load_held(const std::string& path, ModelUse use);

// The file identified as `file` that the process `pid` (a backend of this
// server) holds open as descriptor `fd`, opened through /proc/<pid>/fd/<fd>
// and loaded through this process's own descriptor; nothing when that
// descriptor holds another file now (closed, reused) or cannot be opened.
std::optional<HeldModel> load_held_by(pid_t pid, int fd, const FileIdentity& file, ModelUse use);

}  // namespace kvg::pg::model_fingerprints
