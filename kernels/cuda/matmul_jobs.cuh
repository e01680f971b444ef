// The products of one launch of the matrix-product kernels (matmul.cu,
// matmul_q8.cu): up to kMaxMatmulOutputs matrices reading one input, each
// owning a contiguous range of the grid's row tiles.
#pragma once

#include <cstdint>

#include "kernels/cuda/matmul_output.hpp"

namespace kvg::cuda::detail {

struct MatmulJob {
  const uint8_t* w;
  int64_t rows;
  int64_t row_bytes;
  float* y;
  int64_t y_stride;
  int64_t first_tile;  // row tiles of the jobs before this one
  WeightType type;
};

struct MatmulJobs {
  MatmulJob job[kMaxMatmulOutputs];
  int count = 0;
  int64_t cols = 0;
  int64_t tiles = 0;  // row tiles of all jobs

  // Appends o (rows > 0), whose rows take whole tiles of rows_per_tile.
  void add(const MatmulOutput& o, int64_t rows_per_tile) {
    job[count++] = MatmulJob{o.w.data, o.w.rows, int64_t(o.w.row_bytes), o.y, o.y_stride, tiles, o.w.type};
    tiles += (o.w.rows + rows_per_tile - 1) / rows_per_tile;
  }

  // The job that row tile `tile` belongs to.
  __device__ __forceinline__ const MatmulJob& of_tile(int64_t tile) const {
    int j = 0;
    while (j + 1 < count && tile >= job[j + 1].first_tile) ++j;
    return job[j];
  }
};

}  // namespace kvg::cuda::detail
