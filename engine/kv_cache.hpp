// The KV cache of one context: for every layer, K and V rows of
// n_head_kv * head_dim floats per absolute position, contiguous by position.
// Rows hold keys *after* rotary embedding at their own position, which is what
// makes own-position grafting exact (docs/design.md, recipe rule 5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/zeroed_floats.hpp"

namespace kvg {

class KvCache {
 public:
  // `max_bytes` bounds K and V together (0: unbounded); `limit_name` names
  // that bound in the error that refuses a context beyond it.
  KvCache(int n_layer, int row_floats, int64_t max_positions, int64_t max_bytes = 0,
          const char* limit_name = "the KV memory limit");

  // Bytes K and V take for `positions` positions.
  int64_t bytes_for(int64_t positions) const { return bytes_for(n_layer(), row_floats_, positions); }
  // The same for a cache of this shape not made yet (a call sized before its session).
  static int64_t bytes_for(int n_layer, int row_floats, int64_t positions);

  int n_layer() const { return int(k_.size()); }
  int row_floats() const { return row_floats_; }
  int64_t max_positions() const { return max_positions_; }

  // Positions below `first` are not held here: the session reads them from
  // mapped artifacts (engine/mapped_kv.hpp), so they take no memory and do
  // not count against the bound. Only before anything is reserved.
  void hold_from(int64_t first);
  int64_t first_position() const { return first_; }
  // Bytes the rows held take now (reserved, not only filled).
  int64_t held_bytes() const { return bytes_for(reserved_ - first_); }

  // Makes positions [first_position(), n) addressable (grows in steps; contents kept).
  void reserve(int64_t n);
  float* k(int layer, int64_t position) { return k_[size_t(layer)].data() + (position - first_) * row_floats_; }
  float* v(int layer, int64_t position) { return v_[size_t(layer)].data() + (position - first_) * row_floats_; }
  const float* k(int layer, int64_t position) const {
    return k_[size_t(layer)].data() + (position - first_) * row_floats_;
  }
  const float* v(int layer, int64_t position) const {
    return v_[size_t(layer)].data() + (position - first_) * row_floats_;
  }

 private:
  int row_floats_;
  int64_t max_positions_;
  int64_t first_ = 0;
  int64_t reserved_ = 0;  // positions [first_, reserved_) are allocated
  int64_t max_bytes_ = 0;
  const char* limit_name_;
  std::vector<ZeroedFloats> k_, v_;  // per layer; unfilled rows read 0
};

}  // namespace kvg
