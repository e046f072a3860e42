#include "lib/storage/analyzer_store.h"

#include <exception>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "proto/names.h"

namespace farm::storage {

int ModeNumber(const std::string& mode) { return static_cast<int>(proto::ModeFromName(mode)); }

std::string ModeName(int mode) {
  std::string name = proto::ModeName(mode);
  return name == proto::kUnspecifiedName ? "" : name;
}

iommufarm::v1::Executor ExecutorFromNumber(int number) {
  return iommufarm::v1::Executor_IsValid(number) ? static_cast<iommufarm::v1::Executor>(number)
                                                 : iommufarm::v1::EXECUTOR_UNSPECIFIED;
}

absl::StatusOr<std::string> MatrixSpecMapJson(const std::string& spec_yaml, const char* key) {
  try {
    const YAML::Node root = YAML::Load(spec_yaml);
    nlohmann::json out = nlohmann::json::object();
    if (root.IsMap() && root[key] && root[key].IsMap()) {
      for (const auto& kv : root[key])
        out[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    return out.dump();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("matrix spec_yaml: ", e.what()));
  }
}

absl::StatusOr<std::string> MatrixSpecSetJson(const std::string& spec_yaml) {
  return MatrixSpecMapJson(spec_yaml, "set");
}

absl::Status FillFromMatrixSpec(const std::string& spec_yaml, SeriesSpec* s) {
  absl::StatusOr<std::string> set = MatrixSpecSetJson(spec_yaml);
  if (!set.ok()) return set.status();
  absl::StatusOr<std::string> labels = MatrixSpecMapJson(spec_yaml, "labels");
  if (!labels.ok()) return labels.status();
  s->model_set_json = *std::move(set);
  s->labels_json = *std::move(labels);
  return absl::OkStatus();
}

std::string PerModeJson(const RegressionFinding& finding) {
  std::string per_mode = "[";
  bool first = true;
  for (const RegressionFinding::ModeChange& e : finding.per_mode) {
    if (e.overhead) continue;
    absl::StrAppend(&per_mode, first ? "" : ",", "{\"mode\":", ModeNumber(e.mode),
                    ",\"before\":", e.before, ",\"after\":", e.after,
                    ",\"relative_change\":", e.relative_change, ",\"p_value\":", e.p_value, "}");
    first = false;
  }
  per_mode += "]";
  return per_mode;
}

}  // namespace farm::storage
