// Small synthetic models for tests that need a model but not a trained one
// (tools/synth_model.hpp): written once per name under the build tree.
#pragma once

#include <memory>
#include <string>

#include "engine/model.hpp"
#include "tools/synth_model.hpp"

namespace kvg::test {

// One layer, 32 wide, 2 heads, 300 tokens, 64 positions: the smallest model
// the engine accepts with room for the byte tokens.
SynthOptions tiny_synth_options();

// Two layers, 64 wide, 4 heads over 2 KV heads, FFN 96, 300 tokens, 128
// positions: small, but with GQA, several attention blocks and room for a
// sliding window.
SynthOptions small_synth_options();

// Writes `options` to a fresh file named after `name` and loads it.
std::shared_ptr<const Model> load_synth(const SynthOptions& options, const std::string& name);

}  // namespace kvg::test
