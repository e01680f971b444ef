// Inputs the kernel tests share: the ISAs this CPU runs, and random weight
// matrices of every storage format with valid blocks (sane f16 scales,
// arbitrary quantized payloads).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/isa.hpp"
#include "kernels/cpu/weights.hpp"

namespace kvg::test {

// Scalar first, then every SIMD ISA this CPU supports.
std::vector<Isa> supported_isas();

// Random weights of a given format, rows x cols, rows packed back to back.
std::vector<uint8_t> random_weights(WeightType type, int64_t rows, int64_t cols, std::mt19937& rng);

}  // namespace kvg::test
