// A recipe names one exact arithmetic (docs/recipe.md): how weight-matrix
// products are computed and what the KV cache holds. Every artifact and every
// audit row records the recipe's name; a graft across recipes is refused,
// because only the same arithmetic reproduces the same bits.
//
// Names: the arithmetic, then the KV storage when it is not fp32:
//   f32-portable-v1            fp32 activations, fp32 KV (the default)
//   q8-portable-v1             int8 activations against quantized weights
//   f32-portable-v1+kv-bf16    KV rounded to bfloat16 when it is written
//   q8-portable-v1+kv-i8       both: int8 activations, KV as int8 rows
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvg {

// How a product with a weight matrix is computed. Q8 quantizes activations per
// block to int8 and multiplies them with the block-quantized weights in
// integers; matrices stored as F32/F16/BF16 are computed as under F32.
enum class Arithmetic { F32, Q8 };

// What every K and V value is rounded to when it is written into the cache;
// the values are those of the artifact's kv_dtype (docs/artifact-format.md).
enum class KvStorage : uint32_t { F32 = 0, BF16 = 1, I8 = 2 };

struct Recipe {
  Arithmetic arithmetic = Arithmetic::F32;
  KvStorage kv = KvStorage::F32;

  std::string name() const;
  bool operator==(const Recipe&) const = default;
};

// The recipe of a call that names none: f32-portable-v1. Libraries and audit
// chains recorded under it stay graftable across upgrades; the faster integer
// recipe is chosen explicitly (--recipe, kvg.recipe).
inline constexpr Recipe kDefaultRecipe{};

// Parses a recipe name; throws kvg::Error(InvalidArgument) listing the known
// names for anything else.
Recipe parse_recipe(std::string_view name);

const char* kv_storage_name(KvStorage kv);  // "f32", "bf16", "i8"

// Every recipe this engine computes, the default first.
const std::vector<Recipe>& all_recipes();
// Their names, comma-separated (for errors and help).
std::string known_recipe_names();

}  // namespace kvg
