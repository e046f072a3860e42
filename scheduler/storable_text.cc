#include "scheduler/storable_text.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "absl/strings/str_cat.h"

namespace farm::scheduler {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Where a field sits in the message, linked to its parent; spelled out
// (`results[3].samples[0].metric`) only for an error, so a valid message is
// checked without building a path string per field.
struct FieldPath {
  const FieldPath* parent;
  const FieldDescriptor* field;
  int index;  // -1: not a repeated element (or a map entry)
};

std::string Spell(const FieldPath* p) {
  if (p == nullptr) return "";
  std::string out = Spell(p->parent);
  if (!out.empty()) out.push_back('.');
  out += p->field->name();
  if (p->index >= 0) absl::StrAppend(&out, "[", p->index, "]");
  return out;
}

absl::Status CheckString(std::string_view value, const FieldPath& path) {
  if (value.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(Spell(&path), ": contains a NUL byte, which PostgreSQL text cannot store"));
  }
  if (!IsValidUtf8(value)) {
    return absl::InvalidArgumentError(absl::StrCat(Spell(&path), ": not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::Status Walk(const Message& m, const FieldPath* parent) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  std::string scratch;  // GetStringReference may need it; the fields here never do
  for (const FieldDescriptor* f : fields) {
    const bool text = f->type() == FieldDescriptor::TYPE_STRING;
    const bool nested = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!text && !nested) continue;
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      for (int i = 0; i < n; ++i) {
        const FieldPath at{parent, f, f->is_map() ? -1 : i};
        absl::Status st = text ? CheckString(r->GetRepeatedStringReference(m, f, i, &scratch), at)
                               : Walk(r->GetRepeatedMessage(m, f, i), &at);
        if (!st.ok()) return st;
      }
    } else {
      const FieldPath at{parent, f, -1};
      absl::Status st = text ? CheckString(r->GetStringReference(m, f, &scratch), at)
                             : Walk(r->GetMessage(m, f), &at);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // Eight ASCII bytes at a time: raw outputs are mostly ASCII.
    uint64_t word;
    if (i + sizeof word <= s.size()) {
      std::memcpy(&word, s.data() + i, sizeof word);
      if ((word & 0x8080808080808080ull) == 0) {
        i += sizeof word;
        continue;
      }
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
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
      return false;
    }
    if (i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

absl::Status CheckStorableText(const Message& message) { return Walk(message, nullptr); }

}  // namespace farm::scheduler
