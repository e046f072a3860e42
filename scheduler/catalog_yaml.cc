#include "scheduler/catalog_yaml.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "emu/model/catalog.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/table_checks.h"
#include "lib/spec/yaml_document.h"
#include "lib/spec/yaml_limits.h"
#include "proto/catalog_dag.h"
#include "scheduler/storable_text.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

absl::StatusOr<pb::Catalog> ParseCatalogYaml(std::string_view yaml,
                                             const std::string& source_name) {
  const std::string where = source_name.empty() ? "catalog" : source_name;
  // Aliases may share a `set:` between commits, not multiply the text: a
  // small file must not expand into a catalog no later read can carry.
  spec::YamlExpansionLimits expansion;
  expansion.max_aliases = 100000;
  expansion.max_expanded_nodes = 4 * static_cast<int64_t>(yaml.size()) + 100000;
  expansion.max_expanded_bytes = 4 * static_cast<int64_t>(yaml.size()) + (1 << 20);
  if (absl::Status st = spec::CheckYamlExpansion(yaml, expansion); !st.ok()) {
    // The check words its message for a spec.
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ", absl::StripPrefix(st.message(), "spec: ")));
  }
  if (absl::Status st = spec::CheckYamlDocument(yaml); !st.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.message()));
  // Expectations (`expect:`) are checked as farm-emu checks them: their
  // workload and params against the emulator's tables.
  emu::ExpectValidator expect_validator = [](absl::string_view workload,
                                             const std::map<std::string, std::string>& params) {
    return spec::CheckEmulatorWorkloadParams(std::string(workload), params);
  };
  absl::StatusOr<emu::Catalog> loaded = emu::Catalog::LoadString(
      absl::string_view(yaml.data(), yaml.size()), where, spec::CheckSetKey, expect_validator);
  if (!loaded.ok()) {
    // The loader says kAlreadyExists for a duplicate commit id; to a caller
    // of LoadCatalog that is bad input, not "the catalog already exists".
    return absl::InvalidArgumentError(loaded.status().message());
  }
  if (loaded->name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ":1: catalog: required: the catalog's name"));
  }
  pb::Catalog cat;
  cat.set_name(loaded->name());
  for (const emu::CatalogCommit& c : loaded->commits()) {
    pb::CatalogCommit* cc = cat.add_commits();
    cc->set_index(cat.commits_size() - 1);
    cc->set_id(c.id);
    cc->set_subject(c.subject);
    cc->set_author(c.author);
    for (const auto& [k, v] : c.set) (*cc->mutable_set())[k] = v;
    for (const std::string& p : c.parents) cc->add_parents(p);
  }
  if (cat.ByteSizeLong() > kMaxCatalogBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", cat.ByteSizeLong(),
                                                   " bytes parsed is more than the limit of ",
                                                   kMaxCatalogBytes));
  }
  // YAML escapes ("\0", "\xff") give bytes the file's text did not hold.
  if (absl::Status text = CheckStorableText(cat); !text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", text.message()));
  }
  if (spec::HasControlCharacter(cat.name()))
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": catalog: contains a control character (a name is printed on terminals)"));
  return cat;
}

void ResolveCatalog(pb::Catalog* catalog) {
  const std::vector<std::vector<int>> parents = proto::ParentPositions(*catalog);
  if (!proto::IsLinear(parents)) {
    std::vector<std::map<std::string, std::string>> states;
    for (int i = 0; i < catalog->commits_size(); ++i)
      states.push_back(proto::SettingsAt(*catalog, parents, i));
    for (int i = 0; i < catalog->commits_size(); ++i) {
      pb::CatalogCommit* c = catalog->mutable_commits(i);
      c->mutable_resolved()->clear();
      for (const auto& [k, v] : states[i]) (*c->mutable_resolved())[k] = v;
    }
    return;
  }
  std::map<std::string, std::string> state;
  for (pb::CatalogCommit& c : *catalog->mutable_commits()) {
    for (const auto& [k, v] : c.set()) state[k] = v;
    c.mutable_resolved()->clear();
    for (const auto& [k, v] : state) (*c.mutable_resolved())[k] = v;
  }
}

}  // namespace farm::scheduler
