// Paths to the shared test data (models, tokenizer vectors) and temp files.
#pragma once

#include <string>

namespace kvg::test {

// ../shared next to the checkout, or $KVG_SHARED.
std::string shared_dir();
// Path of a file under shared_dir(); calls GTEST_SKIP-able check via has_shared().
std::string shared_path(const std::string& relative);
bool has_shared(const std::string& relative);
// A fresh, empty directory under the build tree, removed at process exit.
std::string temp_dir(const std::string& name);

inline const char* kStories260K = "models/stories260K.gguf";
inline const char* kTinyStories656K = "models/TinyStories-656K-Q8_0.gguf";

}  // namespace kvg::test

// Skips the current test, with the reason, when a shared file is missing.
#define KVG_REQUIRE_SHARED(rel)                                                   \
  do {                                                                           \
    if (!::kvg::test::has_shared(rel)) GTEST_SKIP() << "missing shared file " << (rel) \
                                                    << " (set KVG_SHARED)";      \
  } while (0)
