#include "lib/base/utf8.h"

#include <string>

#include <gtest/gtest.h>

namespace farm::base {
namespace {

TEST(Utf8Test, WellFormedTextIsValid) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ASCII, longer than one eight-byte word"));
  EXPECT_TRUE(
      IsValidUtf8("\xC2\xB5s \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82"));  // µs 日本 🙂
  EXPECT_TRUE(
      IsValidUtf8(std::string("nul\0inside", 10)));  // NUL is UTF-8; storage is another rule
}

TEST(Utf8Test, MalformedSequencesAreInvalid) {
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("abc\x80"));           // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("12345678\xE6\x97"));  // truncated after an ASCII word
}

// Long ASCII runs are checked eight bytes at a time: a bad byte at any
// offset, and a character straddling a word boundary, are still seen.
TEST(Utf8Test, EveryOffsetOfALongAsciiRun) {
  for (size_t at = 0; at < 24; ++at) {
    std::string s(32, 'a');
    s.replace(at, 2, "\xc3\xa9");
    EXPECT_TRUE(IsValidUtf8(s)) << at;
    s[at] = '\xff';
    EXPECT_FALSE(IsValidUtf8(s)) << at;
    std::string t(32, 'a');
    t.replace(at, 3, "\xe2\x82");  // truncated 3-byte character
    EXPECT_FALSE(IsValidUtf8(t)) << at;
  }
}

TEST(Utf8Test, ReplacementSubstitutesEachBadByteAndKeepsTheRest) {
  std::string s = "ok \xFF\xFE then \xE6\x97\xA5 and a cut \xE6\x97";
  EXPECT_EQ(ReplaceInvalidUtf8(&s), 4u);
  EXPECT_EQ(s, "ok \xEF\xBF\xBD\xEF\xBF\xBD then \xE6\x97\xA5 and a cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(s));
  std::string clean = "unchanged \xC2\xB5s";
  EXPECT_EQ(ReplaceInvalidUtf8(&clean), 0u);
  EXPECT_EQ(clean, "unchanged \xC2\xB5s");
}

}  // namespace
}  // namespace farm::base
