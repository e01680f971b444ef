// The SIMD body of recipe q8-portable-v1's matrix product, shared by the AVX2
// and AVX-512 kernels through a vector traits class V (matmul_q8_avx2.cpp,
// matmul_q8_avx512.cpp): one SIMD lane per token of a panel (q8_panels.hpp),
// a few rows at a time. Each weight block is unpacked once (q8_unpack.hpp)
// and multiplied with every panel of the tile; 4 weights of a row times 4
// elements of every token is one V::dot4. The integer parts of a block are
// exact int32 sums, whatever the grouping; the float steps per lane are the
// spec's, block after block: so every lane gets the scalar kernel's bits.
//
// V provides: kLanes, kOffset (what the panel bytes add to q for signed
// weights; q8_unsigned_weights formats get q itself), kAbs (whether dot4
// needs |v| for signed weights), I and F (int32 and float vectors of kLanes), and
// zero, set1, load, add, mul_scalar (I * int), weights4(u, g) (group g's 4
// weights in every lane, as dot4 wants them), dot4<unsigned weights>(acc,
// panel, weights) (acc + the 4-element products), madd_pairs(acc, pairs, int16 pair),
// cvt, loadf, mulf(F, float), fmadd, fnmadd, storef.
//
// Only included from translation units compiled with at least -mavx2 -mf16c.
#pragma once

#include <algorithm>

#include "kernels/cpu/matmul_q8.hpp"
#include "kernels/cpu/prefetch_rows.hpp"
#include "kernels/cpu/q8_panels.hpp"
#include "kernels/cpu/q8_unpack.hpp"
#include "kernels/cpu/weights.hpp"

namespace kvg::detail {
// (Unnamed namespace: each translation unit, compiled for its own ISA, keeps
// its own copy; the linker must not merge them across ISAs.)
namespace {

// Panels of a tile: each weight block is unpacked once per tile.
constexpr int kQ8PanelsPerTile = 4;

// I1 and I2 of block b of R unpacked rows for every lane of panels
// [p0, p0 + NP): each group's panel vectors and weight broadcasts are loaded
// once for all R x NP products.
template <class V, WeightType kType, int R, int NP>
[[gnu::always_inline]] inline void panel_block_ints(const Q8Panels& pn, int64_t p0, int64_t b, const Q8Unpacked* u, typename V::I (*i1)[NP],
                             typename V::I (*i2)[NP]) {
  using W = Q8Weights<kType>;
  using I = typename V::I;
  constexpr int kSub = W::kScaleSub ? W::kScaleSub : W::kBlock;
  constexpr bool kUnsigned = q8_unsigned_weights(kType);
  const int64_t g0 = b * (W::kBlock / 4);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) i1[r][p] = V::set1(-u[r].correction);
  for (int j = 0; j < W::kBlock / kSub; ++j) {
    I part[R][NP];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) part[r][p] = W::kScaleSub ? V::zero() : i1[r][p];
#pragma GCC unroll 8
    for (int g = j * (kSub / 4); g < (j + 1) * (kSub / 4); ++g) {
      I panel[NP];
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) panel[p] = V::load(pn.q_group(p0 + p, g0 + g));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const auto weights = V::weights4(u[r], g);
#pragma GCC unroll 4
        for (int p = 0; p < NP; ++p) part[r][p] = V::template dot4<kUnsigned>(part[r][p], panel[p], weights);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p)
        i1[r][p] = W::kScaleSub ? V::add(i1[r][p], V::mul_scalar(part[r][p], u[r].scale[j])) : part[r][p];
  }
  if constexpr (W::kSecond != Q8Second::None) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) i2[r][p] = V::zero();
    for (int k = 0; k < W::kBlock / 32; ++k)
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) {
        const I pairs = V::load(pn.sum_pair(p0 + p, b * (W::kBlock / 32) + k));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) i2[r][p] = V::madd_pairs(i2[r][p], pairs, u[r].minpair[k]);
      }
  }
}

// acc += block b's terms, in the spec's order, for every lane.
template <class V, WeightType kType>
[[gnu::always_inline]] inline typename V::F panel_block_update(typename V::F acc, typename V::I i1, typename V::I i2, typename V::F dx,
                                        const Q8Unpacked& u) {
  using W = Q8Weights<kType>;
  acc = V::fmadd(V::cvt(i1), V::mulf(dx, u.d), acc);
  if constexpr (W::kSecond == Q8Second::PlusSum) acc = V::fmadd(V::cvt(i2), V::mulf(dx, u.d2), acc);
  if constexpr (W::kSecond == Q8Second::MinusMins) acc = V::fnmadd(V::cvt(i2), V::mulf(dx, u.d2), acc);
  return acc;
}

// Rows [r0, r0 + R) x panels [p0, p0 + NP).
template <class V, WeightType kType, int R, int NP>
void panel_tile(const WeightMatrix& w, const Q8Panels& pn, int64_t n_tokens, int64_t r0, int64_t p0, float* y,
                int64_t y_stride) {
  using W = Q8Weights<kType>;
  using F = typename V::F;
  using I = typename V::I;
  F acc[R][NP];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[r][p] = V::zerof();
  Q8Unpacked u[R];
  // One tile covers every panel (a batch of decode rows, a short prompt):
  // each weight byte serves few tokens and memory sets the pace, and the
  // next rows read are the next group's, so their blocks are asked for
  // ahead, as decode does (prefetch_rows.hpp).
  const bool stream_rows = pn.n_panels <= kQ8PanelsPerTile;
  for (int64_t b = 0; b < pn.blocks; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {  // unsigned weights: panels without offset, nothing to remove
      if (stream_rows) prefetch_next_group(w.row(r0 + r) + b * W::kBytes, w.row_bytes, R, W::kBytes);
      unpack_block<kType, q8_unsigned_weights(kType) ? 0 : V::kOffset, V::kAbs>(
          w.row(r0 + r) + b * W::kBytes, u[r]);
    }
    I i1[R][NP], i2[R][NP];
    panel_block_ints<V, kType, R, NP>(pn, p0, b, u, i1, i2);
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) {
      const F dx = V::loadf(pn.dx_block(p0 + p, b));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[r][p] = panel_block_update<V, kType>(acc[r][p], i1[r][p], i2[r][p], dx, u[r]);
    }
  }
  // Token by token, each token's R results side by side (one cache line).
  alignas(64) float lanes[NP][R][V::kLanes];
  for (int p = 0; p < NP; ++p)
    for (int r = 0; r < R; ++r) V::storef(lanes[p][r], acc[r][p]);
  for (int p = 0; p < NP; ++p) {
    const int64_t t0 = (p0 + p) * V::kLanes;
    for (int l = 0; l < V::kLanes && t0 + l < n_tokens; ++l) {
      float* out = y + (t0 + l) * y_stride + r0;
      for (int r = 0; r < R; ++r) out[r] = lanes[p][r][l];
    }
  }
}

template <class V, WeightType kType, int R>
void panel_rows(const WeightMatrix& w, const Q8Panels& pn, int64_t n_tokens, int64_t r0, float* y, int64_t y_stride) {
  int64_t p = 0;
  for (; p + kQ8PanelsPerTile <= pn.n_panels; p += kQ8PanelsPerTile)
    panel_tile<V, kType, R, kQ8PanelsPerTile>(w, pn, n_tokens, r0, p, y, y_stride);
  switch (pn.n_panels - p) {
    case 3: panel_tile<V, kType, R, 3>(w, pn, n_tokens, r0, p, y, y_stride); break;
    case 2: panel_tile<V, kType, R, 2>(w, pn, n_tokens, r0, p, y, y_stride); break;
    case 1: panel_tile<V, kType, R, 1>(w, pn, n_tokens, r0, p, y, y_stride); break;
    default: break;
  }
}

// Rows [r0, r1) for every token of the panels.
template <class V>
void panel_matmul(const WeightMatrix& w, const Q8Panels& pn, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                  int64_t y_stride) {
  with_weight_type(w.type, [&](auto type) {
    constexpr WeightType kType = decltype(type)::value;
    if constexpr (kQ8Format<kType>) {
      // Scaled sub-blocks keep a second set of accumulators live: fewer rows.
      constexpr int kRows = Q8Weights<kType>::kScaleSub ? 2 : 4;
      int64_t r = r0;
      for (; r + kRows <= r1; r += kRows) panel_rows<V, kType, kRows>(w, pn, n_tokens, r, y, y_stride);
      for (; r < r1; ++r) panel_rows<V, kType, 1>(w, pn, n_tokens, r, y, y_stride);
    }
  });
}

}  // namespace
}  // namespace kvg::detail
