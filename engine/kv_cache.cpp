#include "engine/kv_cache.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace kvg {

KvCache::KvCache(int n_layer, int row_floats, int64_t max_positions, int64_t max_bytes, const char* limit_name)
    : row_floats_(row_floats),
      max_positions_(max_positions),
      max_bytes_(max_bytes),
      limit_name_(limit_name),
      k_(size_t(n_layer)),
      v_(size_t(n_layer)) {}

int64_t KvCache::bytes_for(int n_layer, int row_floats, int64_t positions) {
  return 2 * int64_t(n_layer) * positions * int64_t(row_floats) * int64_t(sizeof(float));
}

void KvCache::hold_from(int64_t first) {
  if (reserved_ > first_)
    throw Error(ErrorCode::Internal, "KvCache::hold_from after positions were reserved");
  if (first < 0 || first > max_positions_)
    throw Error(ErrorCode::OutOfRange, "a context of " + std::to_string(first) + " positions exceeds the limit of " +
                                           std::to_string(max_positions_));
  first_ = reserved_ = first;
}

void KvCache::reserve(int64_t n) {
  if (n <= reserved_) return;
  if (n > max_positions_)
    throw Error(ErrorCode::OutOfRange, "context of " + std::to_string(n) + " positions exceeds the limit of " +
                                           std::to_string(max_positions_));
  // Refused before anything is allocated: the process never grows past the
  // bound (and never meets the OOM killer on its account).
  const int64_t held = n - first_;
  if (max_bytes_ > 0 && bytes_for(held) > max_bytes_)
    throw Error(ErrorCode::OutOfRange,
                "a context of " + std::to_string(n) + " positions needs " + std::to_string(bytes_for(held)) +
                    " bytes of KV cache (" + std::to_string(bytes_for(1)) + " per position" +
                    (first_ > 0 ? ", from position " + std::to_string(first_) + " on: those before are mapped"
                                : std::string()) +
                    "), above " + limit_name_ + " = " + std::to_string(max_bytes_) + " bytes");
  // Grow geometrically so a long decode reallocates only a few times, never
  // past what the bound allows; and leave room past n (a quarter, at least
  // 256 positions) so the decode that follows a prefill or a graft does not
  // reallocate at once — that copy (and the zeroing of the doubled buffer)
  // was most of what a 2,000-token graft cost beyond hashing and one step.
  // ZeroedFloats now grows without either (engine/zeroed_floats.hpp).
  int64_t cap = max_positions_;
  if (max_bytes_ > 0) cap = std::min(cap, first_ + max_bytes_ / std::max<int64_t>(1, bytes_for(1)));
  const int64_t headroom = std::max<int64_t>(256, held / 4);
  const int64_t target = std::min(cap, first_ + std::max<int64_t>(held + headroom, (reserved_ - first_) * 2));
  for (auto& layer : k_) layer.grow(size_t((target - first_) * row_floats_));
  for (auto& layer : v_) layer.grow(size_t((target - first_) * row_floats_));
  reserved_ = target;
}

}  // namespace kvg
