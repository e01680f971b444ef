#include "kernels/cpu/kv_rounding.hpp"

#include "kernels/kv_rounding.hpp"

namespace kvg {

void round_kv_rows(KvRowRounding rounding, float* rows, int64_t n_rows, int head_dim) {
  switch (rounding) {
    case KvRowRounding::None:
      return;
    case KvRowRounding::Bf16:
      kv_rounding::round_bf16(rows, n_rows * head_dim);
      return;
    case KvRowRounding::I8:
      for (int64_t r = 0; r < n_rows; ++r) kv_rounding::round_i8_row(rows + r * head_dim, head_dim);
      return;
  }
}

}  // namespace kvg
