// An in-memory content-addressed artifact map: enough of a store for engine
// tests (graft, CUDA) and benches (bench-compose) that do not measure a real store.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "engine/graft.hpp"
#include "storage/byte_stream.hpp"

namespace kvg {

struct MemoryArtifacts {
  std::map<Digest, std::vector<uint8_t>> bytes;

  ArtifactOpener opener() {
    return [this](const Digest& id) -> std::unique_ptr<ByteSource> {
      auto it = bytes.find(id);
      if (it == bytes.end()) throw Error(ErrorCode::NotFound, "artifact " + to_hex(id) + " not found");
      return std::make_unique<MemorySource>(it->second);
    };
  }

  // Captures positions [from, to) of the session and keeps the bytes.
  Digest capture_from(const Session& session, int64_t from, int64_t to, std::optional<Digest> parent = std::nullopt) {
    MemorySink sink;
    const Digest id = capture(session, from, to, parent, sink);
    bytes[id] = sink.bytes();
    return id;
  }
};

}  // namespace kvg
