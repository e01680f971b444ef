// Byte-order helpers: every integer and float in an artifact is little-endian,
// whatever the host. On little-endian hosts the float paths are plain copies.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvg {

inline constexpr bool kHostLittleEndian = std::endian::native == std::endian::little;
static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "mixed-endian hosts are not supported");

inline uint32_t load_u32_le(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

inline void store_u32_le(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// Reverses the bytes of n 4-byte words in place (floats or u32 on big-endian hosts).
inline void byteswap_words(void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t i = 0; i < n; ++i, p += 4) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    w = (w >> 24) | ((w >> 8) & 0xff00u) | ((w << 8) & 0xff0000u) | (w << 24);
    std::memcpy(p, &w, 4);
  }
}

}  // namespace kvg
