// What the KV cache holds (issue #14): the rows as computed (f32), or rounded
// as they are written to what a compact artifact stores — bf16, or int8 with
// a power-of-two scale per row. Because attention reads the rounded rows, a
// graft under a compact storage is still bit-identical to a fresh run under
// the same storage; the storage is part of the recipe and of its name, so
// artifacts and logits of different storages never mix (docs/recipe.md).
//
// Stand-in until main's engine/recipe.hpp (Recipe::kv_storage) lands: the
// names and values are the ones it declares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cpu/kv_rounding.hpp"

namespace kvg {

enum class KvStorage { F32, BF16, I8 };

// The artifact header's kv_dtype for it (storage/kv_codec.hpp).
uint32_t kv_dtype_of(KvStorage storage);
// The rounding the forward pass applies to every new K and V row.
KvRowRounding kv_rounding_of(KvStorage storage);
// "f32", "bf16", "i8".
const char* kv_storage_name(KvStorage storage);
std::optional<KvStorage> parse_kv_storage(std::string_view name);
// The recipe name an artifact and a logits hash record: the arithmetic's
// name, plus "+kv-bf16" / "+kv-i8" under a compact storage.
std::string recipe_with_kv_storage(std::string_view arithmetic, KvStorage storage);

}  // namespace kvg
