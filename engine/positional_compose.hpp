// Positional composition (the paper's multi-block context, issue #14): stored
// blocks that were each captured on their own — every one a chain starting at
// position 0 — are placed one after another at disjoint position ranges, and
// nothing is recomputed. A block's keys were rotated for the positions it was
// captured at; here they are rotated on by the offset it is placed at, with
// the recipe's own rotary table. Its values are copied unchanged.
//
// This is NOT exact, and nothing built on it is reported as exact:
//  - a block's KV was computed without the blocks placed before it, so its
//    tokens never attended to them (an exact chain's do);
//  - rotating by the offset after rotating by the original position is not,
//    in floating point, the rotation by their sum (docs/design.md, recipe rule 5).
// The first block is placed at its own positions, so its KV is bit-identical
// to the exact chain's. docs/composition.md says what it computes and what it
// costs against the exact chain.
#pragma once

#include <span>
#include <vector>

#include "engine/graft.hpp"
#include "engine/session.hpp"

namespace kvg {

struct PlacedBlock {
  Digest leaf{};           // the block's chain (its last link)
  int64_t placed_at = 0;   // first position it fills in the composed context
  int64_t n_tokens = 0;    // positions it fills (its whole chain)
};

struct PositionalComposition {
  std::vector<PlacedBlock> blocks;
  int64_t n_tokens = 0;       // positions filled, all blocks together
  static constexpr bool exact = false;  // always: see the header comment
};

// Places the chains ending in `leaves`, in that order, at positions
// session.n_past().. (each right after the one before). Every link of every
// chain is verified as graft() verifies it (bytes, model, recipe, layout,
// positions, parents, token hashes): a block of another model or recipe is
// refused. Refused too: fewer than 2 blocks (one block is an exact graft:
// use graft()), a chain that does not start at position 0, and a composition
// that does not fit the session's window (OutOfRange), checked before any KV
// is read. On any refusal the session is left as it was.
PositionalComposition graft_positional(Session& session, std::span<const Digest> leaves, const ArtifactOpener& open,
                                       const ProgressCheck& check = {});

// Refuses (OutOfRange) `blocks` blocks holding `n_tokens` placed from
// position `start` past a window of `window` positions: graft_positional's
// check, for a caller that composes elsewhere (the engine worker).
void require_composition_fits(size_t blocks, int64_t start, int64_t n_tokens, int64_t window);

// Rotates the K rows of positions [from, from + n) of every layer by `delta`
// positions with the recipe's rotary table, then rounds them to the session's
// KV storage (engine/kv_storage.hpp; nothing under f32): what
// graft_positional does to each placed block; exposed for its tests.
void rerotate_keys(Session& session, int64_t from, int64_t n, int64_t delta);

}  // namespace kvg
