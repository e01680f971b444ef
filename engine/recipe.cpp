#include "engine/recipe.hpp"

#include "common/error.hpp"

namespace kvg {

namespace {

const char* arithmetic_name(Arithmetic a) { return a == Arithmetic::Q8 ? "q8-portable-v1" : "f32-portable-v1"; }

}  // namespace

const char* kv_storage_name(KvStorage kv) {
  switch (kv) {
    case KvStorage::BF16: return "bf16";
    case KvStorage::I8: return "i8";
    case KvStorage::F32: break;
  }
  return "f32";
}

std::string Recipe::name() const {
  std::string n = arithmetic_name(arithmetic);
  if (kv != KvStorage::F32) n += std::string("+kv-") + kv_storage_name(kv);
  return n;
}

const std::vector<Recipe>& all_recipes() {
  static const std::vector<Recipe> all = [] {
    std::vector<Recipe> recipes;
    for (Arithmetic a : {Arithmetic::F32, Arithmetic::Q8})
      for (KvStorage kv : {KvStorage::F32, KvStorage::BF16, KvStorage::I8}) recipes.push_back(Recipe{a, kv});
    return recipes;
  }();
  return all;
}

std::string known_recipe_names() {
  std::string names;
  for (const Recipe& r : all_recipes()) names += (names.empty() ? "" : ", ") + r.name();
  return names;
}

Recipe parse_recipe(std::string_view name) {
  for (const Recipe& r : all_recipes())
    if (r.name() == name) return r;
  throw Error(ErrorCode::InvalidArgument,
              "unknown recipe '" + std::string(name) + "': this engine computes " + known_recipe_names());
}

}  // namespace kvg
