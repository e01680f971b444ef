// How SentencePiece spells text inside pieces: U+2581 for a space, <0xNN> for
// a raw byte. Shared by the tokenizer's encoder, decoder and GGUF loader.
#pragma once

#include <string>
#include <string_view>

namespace kvg {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's stand-in for a space.
inline constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";
// What SentencePiece prints for <unk>: " ⁇ " (U+2047 between spaces).
inline constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";

// The byte a piece "<0xNN>" stands for, or -1 when the piece has another form.
inline int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (const char c : piece.substr(3, 2)) {
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else return -1;
    value = value * 16 + digit;
  }
  return value;
}

// Piece text as it appears in output: every U+2581 becomes a space.
inline std::string unescape_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceSymbol.size()) == kSpaceSymbol) {
      out += ' ';
      i += kSpaceSymbol.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

}  // namespace kvg
