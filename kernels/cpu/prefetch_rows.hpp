// Software prefetch for decode, where one token's product streams every
// weight row once and memory, not arithmetic, sets the pace.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace kvg::detail {
// Unnamed: every translation unit is compiled for its own ISA and keeps its
// own copy, so the linker cannot hand an AVX2 CPU the AVX-512 unit's.
namespace {

// Decode reads a group of rows (four or eight) block by block, and the rows
// of a matrix are contiguous, so the next group begins `group_rows` rows on:
// prefetching the block's place there keeps a whole group's bytes in flight
// ahead of the reads. Measured on 1.1B Q8_0 decode (2 threads, one sitting):
// q8-portable-v1 ~29 -> ~34 tok/s, where prefetching ~512 bytes ahead within
// each row left each group's first blocks waiting on memory, and
// f32-portable-v1 ~19 -> ~29, which had no prefetch. A prefetch never faults,
// so past the matrix's end it is only wasted; the address is formed as an
// integer so that no pointer leaves its object.
inline void prefetch_next_group(const uint8_t* block, size_t row_bytes, int group_rows, int bytes) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(block) + size_t(group_rows) * row_bytes;
  for (int line = 0; line < bytes; line += 64) _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
}

}  // namespace
}  // namespace kvg::detail
