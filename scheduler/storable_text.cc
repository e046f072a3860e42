#include "scheduler/storable_text.h"

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "absl/strings/str_cat.h"
#include "lib/base/utf8.h"

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
  if (!base::IsValidUtf8(value)) {
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

absl::Status CheckStorableText(const Message& message) { return Walk(message, nullptr); }

}  // namespace farm::scheduler
