// libFuzzer harness: the tokenizer (engine/tokenizer*.cpp) of stories260K
// ($KVG_FUZZ_MODEL) on arbitrary text: encode, then decode of what it gave.
// Every input must encode to ids inside the vocabulary or throw kvg::Error.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kvg::Tokenizer tokenizer = [] {
    const char* model = std::getenv("KVG_FUZZ_MODEL");
    return kvg::Tokenizer::from_gguf(*kvg::gguf::File::open(model ? model : "tests/data/models/stories260K.gguf"));
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto ids = tokenizer.encode_with_bos(text);
    for (int32_t id : ids)
      if (id < 0 || id >= int32_t(tokenizer.size())) __builtin_trap();
    (void)tokenizer.decode(ids);
  } catch (const kvg::Error&) {
  }
  return 0;
}
