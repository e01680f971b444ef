// Output bytes as text: U+FFFD for each maximal subpart of an ill-formed
// sequence (and for NUL), incomplete sequences held back while streaming.
#include <gtest/gtest.h>

#include <string>

#include "engine/output_text.hpp"

namespace kvg {
namespace {

const std::string R(kReplacementCharacter);

TEST(OutputText, ValidTextIsUnchanged) {
  const std::string s = "plain \xC3\x9C" "n\xC3\xAF" "c\xC3\xB6" "d\xC3\xA9 \xF0\x9F\x98\x80 text\n";
  EXPECT_TRUE(is_output_text(s));
  EXPECT_EQ(output_text(s), s);
  EXPECT_EQ(output_text(""), "");
}

TEST(OutputText, MaximalSubpartsBecomeOneReplacementEach) {
  // The examples of the Unicode Standard, table 3-8, and their neighbours;
  // the expected values are what Python's bytes.decode("utf-8", "replace") gives.
  EXPECT_EQ(output_text("a\x80" "b"), "a" + R + "b");
  EXPECT_EQ(output_text("\xC0\xAF"), R + R);                       // overlong: C0 never starts
  EXPECT_EQ(output_text("\xE0\x80\xAF"), R + R + R);               // E0 needs A0..BF
  EXPECT_EQ(output_text("\xED\xA0\x80"), R + R + R);               // surrogate
  EXPECT_EQ(output_text("\xF4\x90\x80\x80"), R + R + R + R);       // above U+10FFFF
  EXPECT_EQ(output_text("\xE1\x80" "A"), R + "A");                 // truncated 3-byte: one U+FFFD
  EXPECT_EQ(output_text("\xF0\x9F\x98" "A"), R + "A");             // truncated 4-byte: one U+FFFD
  EXPECT_EQ(output_text("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + R + R + R + "b" + R + "c" + R + R + "d");        // table 3-8
  EXPECT_EQ(output_text("\xFF\xFE"), R + R);
  EXPECT_EQ(output_text("\xF0\x9F\x98"), R);                       // cut off at the end
  EXPECT_FALSE(is_output_text("\xF0\x9F\x98"));
}

TEST(OutputText, NulIsReplaced) {
  EXPECT_EQ(output_text(std::string("a\0b", 3)), "a" + R + "b");
  EXPECT_FALSE(is_output_text(std::string("\0", 1)));
}

TEST(OutputText, StreamingHoldsBackIncompleteSequences) {
  OutputTextStream stream;
  EXPECT_EQ(stream.feed("x\xF0"), "x");
  EXPECT_EQ(stream.feed("\x9F"), "");
  EXPECT_EQ(stream.feed("\x98"), "");
  EXPECT_EQ(stream.feed("\x80y"), "\xF0\x9F\x98\x80y");
  EXPECT_EQ(stream.feed("\xE1\x80"), "");
  EXPECT_EQ(stream.finish(), R);
}

TEST(OutputText, StreamingEqualsWholeForEverySplit) {
  const std::string s = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64\xF0\x9F\x98\x80\xE0\xA0\xF0\x9F";
  for (size_t a = 0; a <= s.size(); ++a)
    for (size_t b = a; b <= s.size(); ++b) {
      OutputTextStream stream;
      std::string out = stream.feed(s.substr(0, a));
      out += stream.feed(s.substr(a, b - a));
      out += stream.feed(s.substr(b));
      out += stream.finish();
      EXPECT_EQ(out, output_text(s)) << a << " " << b;
    }
}

}  // namespace
}  // namespace kvg
