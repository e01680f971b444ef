// Whether a CPU pass is worth its thread pool. Every parallel region of a
// pass (dozens a layer) wakes the pool's threads and waits for them; on a
// small model that costs more than the region's work, so such a pass runs
// on the calling thread alone. Threads never change a bit (recipe rule 1):
// this is only a question of speed.
//
// Measured with `kvg bench --recipe q8-portable-v1 -t 1` against `-t 2` on
// this project's 2-core machine (docs/engine-worker.md, "Small passes"):
// one thread was 2x faster for TinyStories-656K (0.7 MB, 1 and 8 rows), 1.5x
// and 1.25x for a 2.6M-parameter model, 1.1x and 1.04x for 10M (11 MB, 82M
// multiply-adds at 8 rows); two threads were 1.35x faster for 40M parameters
// (43 MB) at one row, and 1.2-1.3x faster for a 256-token prompt on each.
#pragma once

#include <cstdint>
#include <span>

namespace kvg {

class Model;
struct ForwardRequest;

// A pass reading at least these weight bytes, or doing at least these
// multiply-adds, runs on the pool; any other runs inline.
constexpr uint64_t kThreadedPassWeightBytes = uint64_t(16) << 20;
constexpr uint64_t kThreadedPassMacs = uint64_t(128) << 20;

// Multiply-adds of a pass over `parts`: each row through every parameter,
// and its attention over the positions up to its own (scores and values).
uint64_t pass_macs(const Model& model, std::span<const ForwardRequest> parts);

bool pass_pays_for_threads(uint64_t weight_bytes, uint64_t macs);

}  // namespace kvg
