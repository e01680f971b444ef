#include "engine/kv_cache.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace kvg {

KvCache::KvCache(int n_layer, int row_floats, int64_t max_positions)
    : row_floats_(row_floats), max_positions_(max_positions), k_(size_t(n_layer)), v_(size_t(n_layer)) {}

void KvCache::reserve(int64_t n) {
  if (n <= reserved_) return;
  if (n > max_positions_)
    throw Error(ErrorCode::OutOfRange, "context of " + std::to_string(n) + " positions exceeds the limit of " +
                                           std::to_string(max_positions_));
  // Grow geometrically so a long decode reallocates only a few times.
  const int64_t target = std::min(max_positions_, std::max<int64_t>(n, std::max<int64_t>(256, reserved_ * 2)));
  for (auto& layer : k_) layer.resize(size_t(target * row_floats_));
  for (auto& layer : v_) layer.resize(size_t(target * row_floats_));
  reserved_ = target;
}

}  // namespace kvg
