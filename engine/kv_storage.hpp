// What a recipe's KV storage (engine/recipe.hpp) means for the forward pass:
// the rounding every new K and V row gets as it is written into the cache
// (kernels/cpu/kv_rounding.hpp, docs/artifact-format.md section 3). Because
// attention reads the rounded rows, a graft under a compact storage is still
// bit-identical to a fresh run under the same recipe.
#pragma once

#include "engine/recipe.hpp"
#include "kernels/cpu/kv_rounding.hpp"

namespace kvg {

inline KvRowRounding kv_rounding_of(KvStorage storage) {
  switch (storage) {
    case KvStorage::BF16: return KvRowRounding::Bf16;
    case KvStorage::I8: return KvRowRounding::I8;
    case KvStorage::F32: break;
  }
  return KvRowRounding::None;
}

}  // namespace kvg
