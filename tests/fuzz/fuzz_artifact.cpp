// libFuzzer harness: the artifact reader (storage/artifact_reader.cpp, the
// header parser and the KV row codec) on arbitrary bytes. Every input must either verify or throw
// kvg::Error; ASan/UBSan catch everything else.
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    (void)kvg::parse_header(bytes);
  } catch (const kvg::Error&) {
  }
  try {
    (void)kvg::verify_artifact(bytes);
  } catch (const kvg::Error&) {
  }
  // The decoding path (read_layer: f32 copies, bf16 / i8 rows decoded), for
  // headers whose blocks fit a small buffer.
  try {
    kvg::MemorySource src(bytes);
    kvg::ArtifactReader reader(src, 256);
    const kvg::ArtifactHeader& h = reader.header();
    if (h.block_floats() <= (size_t{1} << 18)) {
      std::vector<float> K(h.block_floats()), V(h.block_floats());
      for (uint32_t l = 0; l < h.n_layer; ++l) reader.read_layer(l, K.data(), V.data());
      (void)reader.finish();
    }
  } catch (const kvg::Error&) {
  }
  return 0;
}
