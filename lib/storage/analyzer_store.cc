#include "lib/storage/analyzer_store.h"

#include <exception>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "proto/kernel_config.h"
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

namespace {

// The spec's `kernel_config:` as proto::EncodeKernelConfig; "" when absent.
// A stored spec holds every file's text (`farmctl submit` read them).
absl::StatusOr<std::string> MatrixSpecKernelConfig(const std::string& spec_yaml) {
  try {
    const YAML::Node root = YAML::Load(spec_yaml);
    if (!root.IsMap() || !root["kernel_config"] || !root["kernel_config"].IsMap()) return "";
    const YAML::Node k = root["kernel_config"];
    iommufarm::v1::KernelConfig c;
    if (k["base"]) c.set_base(k["base"].as<std::string>());
    if (k["base_text"]) c.set_base_text(k["base_text"].as<std::string>());
    if (k["fragments"] && k["fragments"].IsSequence()) {
      for (const YAML::Node& f : k["fragments"]) {
        iommufarm::v1::ConfigFragment* out = c.add_fragments();
        if (f.IsScalar()) {
          out->set_name(f.as<std::string>());
        } else if (f.IsMap()) {
          if (f["name"]) out->set_name(f["name"].as<std::string>());
          if (f["text"]) out->set_text(f["text"].as<std::string>());
        }
      }
    }
    return proto::IsDefaultKernelConfig(c) ? "" : proto::EncodeKernelConfig(c);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("matrix spec_yaml: ", e.what()));
  }
}

}  // namespace

absl::Status FillFromMatrixSpec(const std::string& spec_yaml, SeriesSpec* s) {
  absl::StatusOr<std::string> set = MatrixSpecSetJson(spec_yaml);
  if (!set.ok()) return set.status();
  absl::StatusOr<std::string> labels = MatrixSpecMapJson(spec_yaml, "labels");
  if (!labels.ok()) return labels.status();
  absl::StatusOr<std::string> kernel_config = MatrixSpecKernelConfig(spec_yaml);
  if (!kernel_config.ok()) return kernel_config.status();
  s->model_set_json = *std::move(set);
  s->labels_json = *std::move(labels);
  s->kernel_config = *std::move(kernel_config);
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
