// A worker request's dynamic shared memory segment, laid out by PostgreSQL's
// shm_toc (storage/shm_toc.h): chunks found by key under the segment kind's
// magic number, never at offsets computed by hand. Used by the engine
// worker's call and supply segments, the writer's request segments and the
// verifier's; the messages in them are framed (protocol/wire.hpp), so a
// reader bounds each by the segment's end.
//
// create() calls into PostgreSQL and may raise its ERROR (out of dynamic
// shared memory): run it under pg::call, or in a worker's plain C code.
// find() and read_framed() never raise one: a segment that is not laid out
// as asked is nullptr, or a ProtocolError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "extension/src/workers/protocol/wire.hpp"

struct dsm_segment;  // storage/dsm.h

namespace kvg::pg::toc_segment {

struct Chunk {
  uint64_t key;
  size_t bytes;
};

// A new segment of `magic`'s kind holding `chunks`, each inserted under its
// key; their addresses, in order, in `places`. Its bytes are not zeroed: a
// segment carved from min_dynamic_shared_memory (segment_space.hpp) holds
// what an earlier call's segment left there, so every chunk is written
// whole (framed, or set field by field) before the handle is shared.
dsm_segment* create(uint64_t magic, std::span<const Chunk> chunks, void** places);

// The chunk under `key` of an attached segment of `magic`'s kind, or nullptr.
void* find(dsm_segment* segment, uint64_t magic, uint64_t key);

// The bytes from `place` to the end of `segment`'s mapping.
size_t bytes_after(dsm_segment* segment, const void* place);

// The framed message under `key`. ProtocolError when there is none, or it
// does not read as one.
template <class M>
M read_framed(dsm_segment* segment, uint64_t magic, uint64_t key) {
  const void* place = find(segment, magic, key);
  if (!place) throw worker_protocol::ProtocolError("is not in its segment, or the segment is of another kind");
  return worker_protocol::decode_framed<M>(static_cast<const char*>(place), bytes_after(segment, place));
}

}  // namespace kvg::pg::toc_segment
