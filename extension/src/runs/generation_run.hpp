// A generation of a prompt, run where kvg.engine says: in this backend, or
// in the engine worker (engine_worker.hpp), with the same bits either way.
// The caller's side (rights, prefix search, reading artifacts, storing chain
// links, the audit row) is always this backend's.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/generate.hpp"
#include "extension/src/calls/prefix_reuse.hpp"

namespace kvg::pg {

// What a generation is asked for beyond GenerateOptions, in terms both
// places carry out alike.
struct GenerationAsks {
  // Stop once the answer line is complete (engine/answer_line.hpp).
  bool answer_line = false;
  // Positions whose chain links store_links() stores afterwards
  // (store_segment_links' `ends`); none: nothing is stored.
  std::vector<int64_t> link_ends;
  // Graft the start's chain as named, never a longer stored one: the links
  // then continue the chain the caller named (kvg_capture's artifact).
  bool graft_exactly = false;
};

class GenerationRun {
 public:
  Grafted grafted;
  GenerateResult result;

  // Stores the chain links asks.link_ends named (store_segment_links), from
  // this backend's session or from the links the worker captured; returns
  // the last one. Links ending at or before `library_end` are charged to
  // the library.
  std::optional<Digest> store_links(EngineCall& call, int64_t library_end = 0) const;
  // The last link store_links() would store, known without storing
  // anything (segment_links_leaf); the grafted leaf when there is none.
  std::optional<Digest> links_leaf() const;

 private:
  friend GenerationRun run_generation(EngineCall&, std::span<const int32_t>, const StoredPrefix&,
                                      const GenerateOptions&, const GenerationAsks&);
  friend std::vector<GenerationRun> run_generations_together(EngineCall&, const std::vector<std::vector<int32_t>>&,
                                                             const GenerateOptions&,
                                                             const std::vector<GenerationAsks>&);
  std::vector<int64_t> link_ends_;
  std::unique_ptr<Session> session_;              // ran in this backend
  std::vector<std::vector<uint8_t>> links_;  // captured by the worker, in order
};

// graft_stored_prefix(start) then generate() over the rest of `prompt`.
// options.max_new_tokens = 0 prefills and decodes nothing: with
// asks.link_ends, a capture (kvg_capture, a deposit's prompt). Either way the
// call shows in kvg.progress (call_progress.hpp) and its progress notices
// are sent. In the worker, options.check is the worker's own (a cancel
// abandons the call), the worker's reports drive the notices, and
// options.on_token must be empty (GenerationAsks says what a generation may
// decide per token).
GenerationRun run_generation(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start,
                             const GenerateOptions& options, const GenerationAsks& asks = {});

// The generations of several prompts of one call (a set-based call:
// kvg_answers) in this backend, in shared batched passes (step_together),
// each the same tokens as run_generation gives it alone, whatever else runs
// beside it. Each grafts its own longest stored prefix. Their KV together
// is bounded by kvg.max_kv_memory: each prompt gets its share. asks[i] is
// prompts[i]'s; options.on_token must be empty.
std::vector<GenerationRun> run_generations_together(EngineCall& call, const std::vector<std::vector<int32_t>>& prompts,
                                                    const GenerateOptions& options,
                                                    const std::vector<GenerationAsks>& asks);

}  // namespace kvg::pg
