// What one launch of the matrix-product kernels computes: shared by their
// host entry points (matmul.hpp, matmul_q8.hpp) and their device-side job
// table (matmul_jobs.cuh).
#pragma once

#include <cstdint>

#include "kernels/cpu/weights.hpp"

namespace kvg::cuda {

// One product y[t * y_stride + r] = dot(row r of w, x[t]); w.data and y are
// device pointers, w keeps its storage format (quantized stays quantized).
struct MatmulOutput {
  WeightMatrix w;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// Up to this many products that read the same input share one launch (the
// q, k, v projections; the gate and up projections).
constexpr int kMaxMatmulOutputs = 3;

}  // namespace kvg::cuda
