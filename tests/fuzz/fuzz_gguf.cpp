// libFuzzer harness: the GGUF reader (engine/gguf/gguf_file.cpp) on arbitrary
// bytes, then the typed getters a model load uses. Every input must either
// parse or throw kvg::Error; ASan/UBSan catch everything else.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/error.hpp"
#include "engine/gguf/gguf_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader maps a file; /dev/shm keeps that in memory.
  static const std::string path = "/dev/shm/kvg-fuzz-gguf-" + std::to_string(getpid()) + ".gguf";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    auto file = kvg::gguf::File::open(path);
    for (const auto& kv : file->metadata()) (void)file->find(kv.key);
    for (const auto& t : file->tensors()) (void)file->find_tensor(t.name);
    (void)file->opt_string("general.architecture");
    (void)file->opt_uint("llama.context_length");
    try {
      (void)file->get_string_array("tokenizer.ggml.tokens");
    } catch (const kvg::Error&) {
    }
    try {
      (void)file->get_f32_array("tokenizer.ggml.scores");
    } catch (const kvg::Error&) {
    }
  } catch (const kvg::Error&) {
  }
  unlink(path.c_str());
  return 0;
}
