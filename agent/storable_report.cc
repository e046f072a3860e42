#include "agent/storable_report.h"

#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include "absl/strings/str_cat.h"
#include "lib/base/utf8.h"

namespace farm::agent {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

size_t MakeStringsValidUtf8(Message* message) {
  const Reflection* r = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(*message, &fields);
  size_t replaced = 0;
  std::string scratch;
  for (const FieldDescriptor* f : fields) {
    const bool text = f->type() == FieldDescriptor::TYPE_STRING;
    const bool nested = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!text && !nested) continue;
    const int n = f->is_repeated() ? r->FieldSize(*message, f) : 1;
    for (int i = 0; i < n; ++i) {
      if (nested) {
        replaced += MakeStringsValidUtf8(f->is_repeated() ? r->MutableRepeatedMessage(message, f, i)
                                                          : r->MutableMessage(message, f));
        continue;
      }
      // Read without a copy; written back only when something changed.
      const std::string& value = f->is_repeated()
                                     ? r->GetRepeatedStringReference(*message, f, i, &scratch)
                                     : r->GetStringReference(*message, f, &scratch);
      if (base::IsValidUtf8(value)) continue;
      std::string fixed = value;
      replaced += base::ReplaceInvalidUtf8(&fixed);
      if (f->is_repeated()) {
        r->SetRepeatedString(message, f, i, std::move(fixed));
      } else {
        r->SetString(message, f, std::move(fixed));
      }
    }
  }
  return replaced;
}

bool CapRawOutput(std::string* raw) {
  if (raw->size() <= kMaxRawOutputBytes) return false;
  const size_t total = raw->size();
  size_t cut = kMaxRawOutputBytes;
  // Back to a character's first byte, so a valid text stays valid.
  while (cut > 0 && (static_cast<unsigned char>((*raw)[cut]) & 0xC0) == 0x80) --cut;
  raw->resize(cut);
  absl::StrAppend(raw, "\n[farm-agent: raw output cut at ", cut, " of ", total, " bytes]\n");
  return true;
}

}  // namespace farm::agent
