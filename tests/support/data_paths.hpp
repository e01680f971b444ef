// Paths to the test data (tests/data: models, tokenizer vectors) and temp files.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace kvg::test {

// $KVG_TEST_DATA, or the repository's tests/data.
std::string data_dir();
// Path of a file under data_dir(); check it with KVG_REQUIRE_TEST_DATA.
std::string data_path(const std::string& relative);
bool has_data(const std::string& relative);
// True under CI=true (or 1): a missing file or tool is then a failure, not a skip.
bool in_ci();
// A fresh, empty directory under the build tree, removed at process exit.
std::string temp_dir(const std::string& name);

inline const char* kStories260K = "models/stories260K.gguf";
inline const char* kTinyStories656K = "models/TinyStories-656K-Q8_0.gguf";

}  // namespace kvg::test

// Skips the current test, with the reason, when a test data file is missing;
// fails it instead under CI=true, so that a CI run's counts are honest (only
// GPU tests may skip there).
#define KVG_REQUIRE_TEST_DATA(rel)                                                         \
  do {                                                                                     \
    if (!::kvg::test::has_data(rel)) {                                                     \
      if (::kvg::test::in_ci())                                                            \
        GTEST_FAIL() << "missing test data " << ::kvg::test::data_path(rel) << " (CI=true)"; \
      GTEST_SKIP() << "missing test data " << ::kvg::test::data_path(rel)                  \
                   << " (set KVG_TEST_DATA)";                                              \
    }                                                                                      \
  } while (0)
