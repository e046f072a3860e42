#include "lib/spec/yaml_reader.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/utf8.h"

namespace farm::spec {

const char* KindOf(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "empty";
    default:
      return "undefined";
  }
}

bool GetString(const YAML::Node& n, const std::string& path, FieldErrors& e, std::string* out) {
  if (!n.IsScalar() || n.Scalar().empty()) {
    e.Add(path, absl::StrCat("expected a non-empty string, got ", KindOf(n)));
    return false;
  }
  *out = n.Scalar();
  return true;
}

bool GetInt(const YAML::Node& n, const std::string& path, FieldErrors& e, int64_t lo, int64_t hi,
            int64_t* out) {
  int64_t v = 0;
  bool ok = n.IsScalar();
  if (ok) {
    try {
      v = n.as<int64_t>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok) {
    e.Add(path, absl::StrCat("expected an integer, got ",
                             n.IsScalar() ? Quoted(n.Scalar()) : std::string(KindOf(n))));
    return false;
  }
  if (v < lo || v > hi) {
    e.Add(path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
    return false;
  }
  *out = v;
  return true;
}

bool GetBool(const YAML::Node& n, const std::string& path, FieldErrors& e, bool* out) {
  bool v = false;
  bool ok = n.IsScalar();
  if (ok) {
    try {
      v = n.as<bool>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok) {
    e.Add(path, "expected true or false");
    return false;
  }
  *out = v;
  return true;
}

bool GetUint64(const YAML::Node& n, const std::string& path, FieldErrors& e, uint64_t* out) {
  uint64_t v = 0;
  bool ok = n.IsScalar();
  if (ok) {
    try {
      v = n.as<uint64_t>();
    } catch (const YAML::Exception&) {
      ok = false;
    }
  }
  if (!ok) {
    e.Add(path, "expected a non-negative integer");
    return false;
  }
  *out = v;
  return true;
}

bool GetParamValue(const YAML::Node& n, const std::string& path, FieldErrors& e, std::string* out) {
  if (n.IsScalar()) {
    *out = n.Scalar();
    return true;
  }
  if (!n.IsSequence()) {
    e.Add(path, absl::StrCat("expected a scalar or a list of scalars, got ", KindOf(n)));
    return false;
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < n.size(); ++i) {
    if (!n[i].IsScalar()) {
      e.Add(absl::StrCat(path, "[", i, "]"), "expected a scalar");
      return false;
    }
    parts.push_back(n[i].Scalar());
  }
  if (parts.empty()) {
    e.Add(path, "empty list");
    return false;
  }
  *out = absl::StrJoin(parts, ",");
  return true;
}

void GetStringList(const YAML::Node& n, const std::string& path, FieldErrors& e,
                   google::protobuf::RepeatedPtrField<std::string>* out) {
  if (n.IsScalar()) {
    if (n.Scalar().empty()) {
      e.Add(path, "empty");
    } else {
      out->Add(std::string(n.Scalar()));
    }
    return;
  }
  if (!n.IsSequence() || n.size() == 0) {
    e.Add(path, absl::StrCat("expected a string or a non-empty list, got ",
                             n.IsSequence() ? "an empty list" : KindOf(n)));
    return;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    GetString(n[i], absl::StrCat(path, "[", i, "]"), e, &s);
    out->Add(std::move(s));
  }
}

void CheckKeys(const YAML::Node& map, const std::string& path, const std::set<std::string>& allowed,
               FieldErrors& e) {
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
    if (allowed.count(key) == 0) {
      e.Add(path.empty() ? key : path + "." + key,
            absl::StrCat("unknown field (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
}

namespace {

void CheckOneScalar(const YAML::Node& n, const std::string& path, FieldErrors& e) {
  const std::string& v = n.Scalar();
  const char* problem = v.find('\0') != std::string::npos ? "contains a NUL byte"
                        : !base::IsValidUtf8(v)           ? "is not valid UTF-8"
                                                          : nullptr;
  if (problem == nullptr) return;
  e.Add(path.empty() ? "(top level)" : path,
        absl::StrCat(problem, " (line ", n.Mark().line + 1, "); text must be UTF-8 without NUL"));
}

}  // namespace

void CheckScalarText(const YAML::Node& root, FieldErrors& e) {
  // Explicit stack: nesting depth is the document's, not the C++ stack's.
  std::vector<std::pair<YAML::Node, std::string>> todo{{root, ""}};
  while (!todo.empty() && !e.full()) {
    auto [n, path] = std::move(todo.back());
    todo.pop_back();
    if (n.IsScalar()) {
      CheckOneScalar(n, path, e);
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i)
        todo.emplace_back(n[i], absl::StrCat(path, "[", i, "]"));
    } else if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it) {
        const std::string key = it->first.IsScalar() ? it->first.Scalar() : "?";
        const std::string at = path.empty() ? key : absl::StrCat(path, ".", key);
        if (it->first.IsScalar()) CheckOneScalar(it->first, at, e);
        todo.emplace_back(it->second, at);
      }
    }
  }
}

}  // namespace farm::spec
