#include "kernels/cpu/weights.hpp"

namespace kvg {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "f32";
    case WeightType::F16: return "f16";
    case WeightType::BF16: return "bf16";
    case WeightType::Q8_0: return "q8_0";
    case WeightType::Q4_0: return "q4_0";
    case WeightType::Q4_K: return "q4_k";
    case WeightType::Q6_K: return "q6_k";
    case WeightType::Q4_1: return "q4_1";
    case WeightType::Q5_0: return "q5_0";
    case WeightType::Q5_1: return "q5_1";
    case WeightType::Q2_K: return "q2_k";
    case WeightType::Q3_K: return "q3_k";
    case WeightType::Q5_K: return "q5_k";
  }
  return "?";
}

int weight_block_elements(WeightType t) {
  switch (t) {
    case WeightType::Q8_0:
    case WeightType::Q4_0:
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1: return 32;
    case WeightType::Q4_K:
    case WeightType::Q6_K:
    case WeightType::Q2_K:
    case WeightType::Q3_K:
    case WeightType::Q5_K: return 256;
    default: return 1;
  }
}

int weight_block_bytes(WeightType t) {
  switch (t) {
    case WeightType::F32: return 4;
    case WeightType::F16:
    case WeightType::BF16: return 2;
    case WeightType::Q8_0: return 34;
    case WeightType::Q4_0: return 18;
    case WeightType::Q4_K: return 144;
    case WeightType::Q6_K: return 210;
    case WeightType::Q4_1: return 20;
    case WeightType::Q5_0: return 22;
    case WeightType::Q5_1: return 24;
    case WeightType::Q2_K: return 84;
    case WeightType::Q3_K: return 110;
    case WeightType::Q5_K: return 176;
  }
  return 0;
}

}  // namespace kvg
