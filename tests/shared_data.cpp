#include "tests/shared_data.hpp"

#include <cstdlib>
#include <filesystem>
#include <unistd.h>

namespace kvg::test {

std::string shared_dir() {
  if (const char* env = std::getenv("KVG_SHARED"); env && *env) return env;
  return KVG_SHARED_DEFAULT;
}

std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }

bool has_shared(const std::string& relative) { return std::filesystem::exists(shared_path(relative)); }

std::string temp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(KVG_BINARY_DIR) / "test-tmp" / (name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

}  // namespace kvg::test
