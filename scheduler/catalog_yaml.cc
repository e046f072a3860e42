#include "scheduler/catalog_yaml.h"

#include <map>
#include <set>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

absl::StatusOr<pb::Catalog> ParseCatalogYaml(std::string_view yaml,
                                             const std::string& source_name) {
  const std::string where = source_name.empty() ? "catalog" : source_name;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": YAML syntax error at line ",
                                                   ex.mark.line + 1, ", column ",
                                                   ex.mark.column + 1, ": ", ex.msg));
  }
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(where + ": expected a YAML map with catalog: and commits:");
  }
  std::vector<std::string> errors;
  auto err = [&](const std::string& path, const std::string& msg) {
    errors.push_back(absl::StrCat(where, ": ", path, ": ", msg));
  };
  pb::Catalog cat;
  if (!root["catalog"] || !root["catalog"].IsScalar() || root["catalog"].Scalar().empty()) {
    err("catalog", "required: the catalog's name");
  } else {
    cat.set_name(root["catalog"].Scalar());
  }
  const YAML::Node commits = root["commits"];
  if (!commits || !commits.IsSequence() || commits.size() == 0) {
    err("commits", "required: a non-empty list of {id, subject, set}");
  } else {
    std::set<std::string> seen;
    for (size_t i = 0; i < commits.size(); ++i) {
      const std::string p = absl::StrCat("commits[", i, "]");
      const YAML::Node c = commits[i];
      if (!c.IsMap()) {
        err(p, "expected a map {id, subject, set}");
        continue;
      }
      pb::CatalogCommit cc;
      if (!c["id"] || !c["id"].IsScalar() || c["id"].Scalar().empty()) {
        err(p + ".id", "required");
        continue;
      }
      cc.set_id(c["id"].Scalar());
      if (!seen.insert(cc.id()).second) {
        err(p + ".id", absl::StrCat("duplicate \"", cc.id(), "\""));
        continue;
      }
      if (c["subject"]) {
        if (!c["subject"].IsScalar()) {
          err(p + ".subject", "expected a string");
        } else {
          cc.set_subject(c["subject"].Scalar());
        }
      }
      if (c["set"] && !c["set"].IsNull()) {
        if (!c["set"].IsMap()) {
          err(p + ".set", "expected a map of model keys");
        } else {
          for (auto it = c["set"].begin(); it != c["set"].end(); ++it) {
            const std::string key = it->first.Scalar();
            if (!it->second.IsScalar()) {
              err(p + ".set." + key, "expected a scalar");
              continue;
            }
            (*cc.mutable_set())[key] = it->second.Scalar();
          }
        }
      }
      cc.set_index(cat.commits_size());
      *cat.add_commits() = std::move(cc);
    }
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  return cat;
}

void ResolveCatalog(pb::Catalog* catalog) {
  std::map<std::string, std::string> state;
  for (pb::CatalogCommit& c : *catalog->mutable_commits()) {
    for (const auto& [k, v] : c.set()) state[k] = v;
    c.mutable_resolved()->clear();
    for (const auto& [k, v] : state) (*c.mutable_resolved())[k] = v;
  }
}

}  // namespace farm::scheduler
