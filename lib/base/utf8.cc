#include "lib/base/utf8.h"

#include <cstdint>
#include <cstring>

namespace farm::base {
namespace {

// Length of the well-formed sequence at s[i], or 0 when there is none.
size_t SequenceAt(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t len = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// Eight ASCII bytes at s[i]: raw outputs are mostly ASCII.
bool AsciiWordAt(std::string_view s, size_t i) {
  uint64_t word;
  if (i + sizeof word > s.size()) return false;
  std::memcpy(&word, s.data() + i, sizeof word);
  return (word & 0x8080808080808080ull) == 0;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (AsciiWordAt(s, i)) {
      i += 8;
      continue;
    }
    const size_t len = SequenceAt(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t ReplaceInvalidUtf8(std::string* s) {
  if (IsValidUtf8(*s)) return 0;
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(s->size() + 16);
  size_t replaced = 0;
  for (size_t i = 0; i < s->size();) {
    const size_t len = SequenceAt(*s, i);
    if (len == 0) {
      out.append(kReplacement);
      ++replaced;
      ++i;
    } else {
      out.append(*s, i, len);
      i += len;
    }
  }
  *s = std::move(out);
  return replaced;
}

}  // namespace farm::base
