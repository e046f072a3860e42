#include "scheduler/storable_text.h"

#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "absl/strings/str_cat.h"

namespace farm::scheduler {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

absl::Status CheckString(const std::string& value, const std::string& path) {
  if (value.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": contains a NUL byte, which PostgreSQL text cannot store"));
  }
  if (!IsValidUtf8(value)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid UTF-8"));
  }
  return absl::OkStatus();
}

absl::Status Walk(const Message& m, const std::string& prefix) {
  const Reflection* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    const std::string name = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    const bool text = f->type() == FieldDescriptor::TYPE_STRING;
    const bool nested = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!text && !nested) continue;
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      for (int i = 0; i < n; ++i) {
        const std::string at = f->is_map() ? name : absl::StrCat(name, "[", i, "]");
        absl::Status st = text ? CheckString(r->GetRepeatedString(m, f, i), at)
                               : Walk(r->GetRepeatedMessage(m, f, i), at);
        if (!st.ok()) return st;
      }
    } else {
      absl::Status st =
          text ? CheckString(r->GetString(m, f), name) : Walk(r->GetMessage(m, f), name);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
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

absl::Status CheckStorableText(const Message& message) { return Walk(message, ""); }

}  // namespace farm::scheduler
