#include "tests/support/data_paths.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace kvg::test {

std::string data_dir() {
  if (const char* env = std::getenv("KVG_TEST_DATA"); env && *env) return env;
  return KVG_TEST_DATA_DEFAULT;
}

std::string data_path(const std::string& relative) { return data_dir() + "/" + relative; }

bool has_data(const std::string& relative) { return std::filesystem::exists(data_path(relative)); }

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && (std::string(ci) == "true" || std::string(ci) == "1");
}

namespace {
// Directories handed out by temp_dir(), removed when the test process exits.
struct TempDirs {
  std::vector<std::filesystem::path> dirs;
  ~TempDirs() {
    std::error_code ignored;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ignored);
  }
};
TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

std::string temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(KVG_BINARY_DIR) / "test-tmp" / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  temp_dirs().dirs.push_back(dir);
  return dir.string();
}

}  // namespace kvg::test
