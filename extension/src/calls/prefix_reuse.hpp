// Automatic prefix reuse inside the database: graft the longest stored chain
// that begins a prompt (found through kvg.artifacts' (parent_sha256,
// tokens_sha256) index, engine/prefix_search.hpp), and store the segments a
// call computed as new chain links so that the next call grafts them.
// kvg.prefix_reuse = off turns both off: everything is then computed, and the
// output is the same bytes (the tests compare the two).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/generate.hpp"
#include "engine/prefix_search.hpp"
#include "extension/src/calls/engine_call.hpp"

namespace kvg::pg {

struct Grafted {
  std::optional<Digest> leaf;  // the chain put into the session (nullopt: none)
  int64_t tokens = 0;          // positions it filled
  int64_t micros = 0;          // time the graft took (reading and verifying included)
  // Every grafted link is trusted (docs/security.md): what the session holds
  // is what this engine computes for its tokens. False only when the caller
  // named an untrusted chain itself.
  bool proven = true;
};

// Grafts into `session` (empty) the chain `start` names when it has a leaf —
// always, as the caller asked for it, trusted or not (Grafted::proven says
// which) — extended by the longest trusted stored chain continuing it when
// kvg.prefix_reuse is on; without one, the longest trusted stored chain
// beginning `prompt`, if any. `start.end` is the number of tokens of its
// chain, which `prompt` must begin with.
Grafted graft_stored_prefix(EngineCall& call, Session& session, std::span<const int32_t> prompt,
                            const StoredPrefix& start = {});

// The chain graft_stored_prefix() grafts, chosen without grafting it (the
// engine worker grafts it: generation_run.hpp), and whether it is proven.
struct ChosenPrefix {
  StoredPrefix chain;
  bool proven = true;
};
ChosenPrefix choose_stored_prefix(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start = {});

// `start` as it is, never extended (kvg_capture's link continues the
// artifact it names), and whether it is proven.
ChosenPrefix exactly(EngineCall& call, const StoredPrefix& start);

// Grafts the chosen chain into `session` (empty), verifying every link
// against `prompt`, the model and its bytes.
Grafted graft_chosen(EngineCall& call, Session& session, std::span<const int32_t> prompt, const ChosenPrefix& chosen);

// Prompt positions whose KV a graft put in place and the forward pass did not
// recompute: a wholly grafted prompt has its last token evaluated again for
// its logits (engine/generate.cpp).
int64_t grafted_tokens_used(const Grafted& grafted, int64_t prompt_tokens);

// The audit fields of a generation of `prompt` after `grafted`: the chain
// (leaf and every link), token counts, times, kv_proven, and what an auditor
// needs to decode it again (kvg_generate, kvg_chat): the prompt tokens'
// hash, the sampling parameters, max_tokens and why it stopped.
void audit_generation(AuditRecord& audit, EngineCall& call, const Grafted& grafted,
                      std::span<const int32_t> prompt, const GenerateOptions& options, const GenerateResult& result);

// SHA-256 of token ids as int32 little-endian bytes (the audit's
// prompt_tokens_sha256), lowercase hex.
std::string tokens_sha256(std::span<const int32_t> tokens);

// The chain ending in `leaf`, root first, as comma-separated hex (from the
// rows of kvg.artifacts: no artifact is read).
std::string chain_text(const Digest& leaf, LoStore& store);

// Stores positions [grafted.tokens, ends.back()) of the session as chain links
// continuing grafted.leaf, one per segment end (`ends`, increasing), and
// returns the last link: the artifact of the whole prompt. Content already
// stored is stored once. The links are `computed` over a proven graft and
// `derived` otherwise. Links that end at or before `library_end` are
// composed from library entries and charged to the library (lo_store.hpp,
// Payer::Library); past its quota nothing more is stored, and nullopt is
// returned: the call goes on.
std::optional<Digest> store_segment_links(EngineCall& call, const Session& session, const Grafted& grafted,
                                          std::span<const int64_t> ends, int64_t library_end = 0);

// Stores chain links captured elsewhere (by the engine worker: their bytes,
// in chain order, the first continuing grafted.leaf) as store_segment_links()
// stores the ones it captures, and returns the last one.
std::optional<Digest> store_captured_links(EngineCall& call, const Grafted& grafted,
                                           std::span<const std::vector<uint8_t>> links, int64_t library_end = 0);

// The last link store_segment_links() would store, computed without storing
// anything (a deposit learns its entry's artifact before it knows whether
// the entry is new: knowledge_deposit.cpp).
std::optional<Digest> segment_links_leaf(const Session& session, const Grafted& grafted,
                                         std::span<const int64_t> ends);

}  // namespace kvg::pg
