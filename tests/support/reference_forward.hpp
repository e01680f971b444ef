// An independent, deliberately plain double-precision llama forward pass
// used only to check the engine's numbers (not its bits). It shares nothing
// with the engine's kernels but the GGUF reader and exact dequantization, and
// uses the platform's libm on purpose.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model.hpp"

namespace kvg::test {

// Logits of every position of `tokens` as doubles, row-major [position][vocab].
std::vector<double> reference_logits(const Model& model, const std::vector<int32_t>& tokens);

}  // namespace kvg::test
