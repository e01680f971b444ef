#include "tests/support/kernel_fixtures.hpp"

#include <cstring>

#include "kernels/cpu/float16.hpp"

namespace kvg::test {

std::vector<Isa> supported_isas() {
  std::vector<Isa> isas = {Isa::Scalar};
  if (int(detect_isa()) >= int(Isa::Avx2)) isas.push_back(Isa::Avx2);
  if (int(detect_isa()) >= int(Isa::Avx512)) isas.push_back(Isa::Avx512);
  return isas;
}

std::vector<uint8_t> random_weights(WeightType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  const size_t row_bytes = size_t(cols / weight_block_elements(type) * weight_block_bytes(type));
  std::vector<uint8_t> data(row_bytes * size_t(rows));
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(byte(rng));
  // Keep f32/f16/bf16 values finite and scales sane; quantized payloads may be any bytes.
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = data.data() + size_t(r) * row_bytes;
    for (int64_t k = 0; k < cols; ++k) {
      if (type == WeightType::F32) { float v = value(rng); std::memcpy(row + k * 4, &v, 4); }
      if (type == WeightType::F16) { uint16_t h = f32_to_f16(value(rng)); std::memcpy(row + k * 2, &h, 2); }
      if (type == WeightType::BF16) { uint16_t h = f32_to_bf16(value(rng)); std::memcpy(row + k * 2, &h, 2); }
    }
    if (type == WeightType::Q8_0 || type == WeightType::Q4_0)
      for (int64_t b = 0; b < cols / 32; ++b) {
        uint16_t d = f32_to_f16(value(rng) * 0.05f);
        std::memcpy(row + size_t(b) * size_t(weight_block_bytes(type)), &d, 2);
      }
    // The other formats: sane f16 scales at their offsets within the block.
    struct Scales { WeightType type; int d, m; };  // byte offsets; m < 0: none
    for (const Scales sc : {Scales{WeightType::Q4_1, 0, 2}, Scales{WeightType::Q5_0, 0, -1},
                            Scales{WeightType::Q5_1, 0, 2}, Scales{WeightType::Q2_K, 80, 82},
                            Scales{WeightType::Q3_K, 108, -1}, Scales{WeightType::Q5_K, 0, 2}}) {
      if (type != sc.type) continue;
      for (int64_t b = 0; b < cols / weight_block_elements(type); ++b) {
        uint8_t* block = row + size_t(b) * size_t(weight_block_bytes(type));
        const uint16_t d = f32_to_f16(value(rng) * 0.01f), m = f32_to_f16(value(rng) * 0.01f);
        std::memcpy(block + sc.d, &d, 2);
        if (sc.m >= 0) std::memcpy(block + sc.m, &m, 2);
      }
    }
    // K-quants: sane f16 scales (d, dmin for Q4_K at the start; d at the end for Q6_K).
    if (type == WeightType::Q4_K || type == WeightType::Q6_K)
      for (int64_t b = 0; b < cols / 256; ++b) {
        uint8_t* block = row + size_t(b) * size_t(weight_block_bytes(type));
        const uint16_t d = f32_to_f16(value(rng) * 0.01f), dmin = f32_to_f16(value(rng) * 0.01f);
        std::memcpy(type == WeightType::Q4_K ? block : block + 208, &d, 2);
        if (type == WeightType::Q4_K) std::memcpy(block + 2, &dmin, 2);
      }
  }
  return data;
}

}  // namespace kvg::test
