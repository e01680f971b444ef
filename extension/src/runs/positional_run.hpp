// kvg_generate_positional's composition and generation
// (engine/positional_compose.hpp), run where kvg.engine says: in this
// backend, or in the engine worker, which places the blocks in a sequence's
// own cache (their links sent as a graft's are, when it lacks them) and
// decodes it with everyone's passes. The same tokens either way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/generate.hpp"
#include "extension/src/calls/engine_call.hpp"

namespace kvg::pg {

struct PositionalRun {
  std::vector<int32_t> prompt;  // the blocks' tokens, then the text's
  int64_t composed = 0;         // positions the blocks fill
  int64_t compose_micros = 0;
  GenerateResult result;
};

// The blocks (each readable by the caller: checked before) placed one after
// another, `text` evaluated after them as their continuation, then decoded
// as `options` say.
PositionalRun run_positional(EngineCall& call, std::span<const Digest> blocks, const std::string& text,
                             const GenerateOptions& options);

}  // namespace kvg::pg
