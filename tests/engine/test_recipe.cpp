// Recipe names: what every artifact and audit row records, so they must be
// stable, distinct and parse back to the same recipe.
#include <set>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/recipe.hpp"

namespace kvg {
namespace {

TEST(Recipe, NamesAreStableAndParseBack) {
  EXPECT_EQ(kDefaultRecipe.name(), "f32-portable-v1");
  EXPECT_EQ((Recipe{Arithmetic::Q8, KvStorage::F32}).name(), "q8-portable-v1");
  EXPECT_EQ((Recipe{Arithmetic::F32, KvStorage::BF16}).name(), "f32-portable-v1+kv-bf16");
  EXPECT_EQ((Recipe{Arithmetic::Q8, KvStorage::I8}).name(), "q8-portable-v1+kv-i8");
  std::set<std::string> names;
  for (const Recipe& r : all_recipes()) {
    EXPECT_EQ(parse_recipe(r.name()), r) << r.name();
    names.insert(r.name());
  }
  EXPECT_EQ(names.size(), all_recipes().size());
  EXPECT_EQ(all_recipes().size(), 6u);
  EXPECT_EQ(all_recipes().front(), kDefaultRecipe);
}

TEST(Recipe, KvStorageIsTheArtifactDtype) {
  // docs/artifact-format.md: kv_dtype 0 = f32, 1 = bf16, 2 = i8.
  EXPECT_EQ(uint32_t(KvStorage::F32), 0u);
  EXPECT_EQ(uint32_t(KvStorage::BF16), 1u);
  EXPECT_EQ(uint32_t(KvStorage::I8), 2u);
}

TEST(Recipe, UnknownNamesAreRefusedWithTheKnownOnes) {
  for (const char* bad : {"", "f32", "q8-portable-v2", "f32-portable-v1+kv-f16", "F32-PORTABLE-V1", "f32-portable-v1 "}) {
    try {
      parse_recipe(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("q8-portable-v1+kv-bf16"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvg
