// libFuzzer harness: the artifact reader (storage/artifact_reader.cpp and the
// header parser) on arbitrary bytes. Every input must either verify or throw
// kvg::Error; ASan/UBSan catch everything else.
#include <cstdint>
#include <span>

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
  return 0;
}
