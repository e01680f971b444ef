#include "tests/shared_data.hpp"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <vector>

namespace kvg::test {

std::string shared_dir() {
  if (const char* env = std::getenv("KVG_SHARED"); env && *env) return env;
  return KVG_SHARED_DEFAULT;
}

std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }

bool has_shared(const std::string& relative) { return std::filesystem::exists(shared_path(relative)); }

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
