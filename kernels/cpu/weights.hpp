// A weight matrix as the kernels see it: rows of `cols` elements in one of the
// storage formats below, row r starting at data + r * row_bytes.
//
// Every format dequantizes to fp32 by one fixed formula (docs/recipe.md); for
// every format the integer parts and the f16 scales are decoded exactly; the
// table in docs/recipe.md says which float steps round.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/host_device.hpp"

namespace kvg {

// Later formats are appended, so the existing values never change.
enum class WeightType : uint8_t { F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K };

const char* weight_type_name(WeightType t);
// Elements per block and bytes per block of each format.
int weight_block_elements(WeightType t);
int weight_block_bytes(WeightType t);

struct WeightMatrix {
  WeightType type = WeightType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;       // output features
  int64_t cols = 0;       // input features (multiple of the block size)
  size_t row_bytes = 0;

  const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
};

// Calls f(std::integral_constant<WeightType, T>{}) for the runtime type t,
// so a kernel templated on the format is instantiated once per format and
// chosen with one switch (on the CPU and in the CUDA kernels alike).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // f may be host-only (a launch) or device-only (a tile)
#endif
template <typename F>
KVG_HOST_DEVICE decltype(auto) with_weight_type(WeightType t, F&& f) {
  using T = WeightType;
  switch (t) {
    case T::F16: return f(std::integral_constant<T, T::F16>{});
    case T::BF16: return f(std::integral_constant<T, T::BF16>{});
    case T::Q8_0: return f(std::integral_constant<T, T::Q8_0>{});
    case T::Q4_0: return f(std::integral_constant<T, T::Q4_0>{});
    case T::Q4_K: return f(std::integral_constant<T, T::Q4_K>{});
    case T::Q6_K: return f(std::integral_constant<T, T::Q6_K>{});
    case T::Q4_1: return f(std::integral_constant<T, T::Q4_1>{});
    case T::Q5_0: return f(std::integral_constant<T, T::Q5_0>{});
    case T::Q5_1: return f(std::integral_constant<T, T::Q5_1>{});
    case T::Q2_K: return f(std::integral_constant<T, T::Q2_K>{});
    case T::Q3_K: return f(std::integral_constant<T, T::Q3_K>{});
    case T::Q5_K: return f(std::integral_constant<T, T::Q5_K>{});
    case T::F32: break;
  }
  return f(std::integral_constant<T, T::F32>{});
}

}  // namespace kvg
