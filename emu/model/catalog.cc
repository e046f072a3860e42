#include "emu/model/catalog.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/strings/string_view.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "emu/model/platform.h"
#include "lib/base/check.h"
#include "lib/base/file.h"
#include "lib/iommu_mode/iommu_mode.h"

#ifndef FARM_EMU_SOURCE_CATALOG_DIR
#define FARM_EMU_SOURCE_CATALOG_DIR ""
#endif

namespace farm::emu {
namespace {

constexpr size_t kMinPrefix = 7;

std::string Where(absl::string_view source, int line) { return absl::StrCat(source, ":", line); }

absl::Status ErrorAt(absl::string_view source, const YAML::Node& node, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(source, node.Mark().line + 1), ": ", message));
}

bool IsHex(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Two commit ids name the same commit when one abbreviates the other.
bool SameCommit(absl::string_view a, absl::string_view b) {
  if (a == b) return true;
  if (!IsHex(a) || !IsHex(b) || a.size() < kMinPrefix || b.size() < kMinPrefix) return false;
  std::string la = absl::AsciiStrToLower(a);
  std::string lb = absl::AsciiStrToLower(b);
  return absl::StartsWith(la, lb) || absl::StartsWith(lb, la);
}

absl::Status CheckIdText(absl::string_view id) {
  if (id.empty()) return absl::InvalidArgumentError("empty commit id");
  for (char c : id) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("commit id '", id, "' contains whitespace"));
    }
  }
  if (absl::StrContains(id, "..")) {
    return absl::InvalidArgumentError(
        absl::StrCat("commit id '", id, "' contains '..' (reserved for ranges)"));
  }
  return absl::OkStatus();
}

constexpr size_t kMaxErrors = 20;

// One status for many: the first one's code, every message on its own line.
absl::Status JoinErrors(const std::vector<absl::Status>& errors) {
  std::vector<std::string> lines;
  for (const absl::Status& e : errors) lines.emplace_back(e.message());
  if (errors.size() >= kMaxErrors)
    lines.push_back(absl::StrCat("(stopped after ", kMaxErrors, " errors)"));
  return absl::Status(errors.front().code(), absl::StrJoin(lines, "\n"));
}

// A list of names (`platforms`, `modes`): a non-empty YAML list of scalars.
absl::StatusOr<std::vector<std::string>> ParseNameList(const YAML::Node& entry, const char* field,
                                                       absl::string_view source_name,
                                                       absl::string_view what) {
  const YAML::Node node = entry[field];
  if (!node || !node.IsSequence() || node.size() == 0) {
    return ErrorAt(source_name, node ? node : entry,
                   absl::StrCat(what, ": '", field, "' must be a non-empty list"));
  }
  std::vector<std::string> out;
  for (const YAML::Node& n : node) {
    if (!n.IsScalar() || n.Scalar().empty()) {
      return ErrorAt(source_name, n, absl::StrCat(what, ": '", field, "' lists names"));
    }
    out.push_back(n.Scalar());
  }
  return out;
}

absl::Status CheckPlatformsAndModes(const CatalogExpectation& e, const YAML::Node& entry,
                                    absl::string_view source_name, absl::string_view what) {
  for (const std::string& p : e.platforms) {
    if (absl::StatusOr<const Platform*> found = FindPlatform(p); !found.ok()) {
      return ErrorAt(source_name, entry["platforms"],
                     absl::StrCat(what, ": ", found.status().message()));
    }
  }
  for (const std::string& m : e.modes) {
    if (!iommu_mode::FromWord(m)) {
      return ErrorAt(
          source_name, entry["modes"],
          absl::StrCat(what, ": unknown mode '", m, "' (expected: ", iommu_mode::WordList(), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RequiredText(const YAML::Node& entry, const char* field,
                                         absl::string_view source_name, absl::string_view what) {
  const YAML::Node n = entry[field];
  if (!n || !n.IsScalar() || n.Scalar().empty()) {
    return ErrorAt(source_name, n ? n : entry,
                   absl::StrCat(what, ": '", field, "' is required (text)"));
  }
  return n.Scalar();
}

absl::Status ParseMetricAndDirection(const YAML::Node& entry, absl::string_view source_name,
                                     absl::string_view what, CatalogExpectation& e) {
  absl::StatusOr<std::string> metric = RequiredText(entry, "metric", source_name, what);
  if (!metric.ok()) return metric.status();
  if (*metric == "throughput") {
    e.metric = ExpectMetric::kThroughput;
  } else if (*metric == "map_ns") {
    e.metric = ExpectMetric::kMapNs;
  } else if (*metric == "unmap_ns") {
    e.metric = ExpectMetric::kUnmapNs;
  } else {
    return ErrorAt(source_name, entry["metric"],
                   absl::StrCat(what, ": unknown metric '", *metric,
                                "' (expected throughput, map_ns, unmap_ns)"));
  }
  absl::StatusOr<std::string> dir = RequiredText(entry, "direction", source_name, what);
  if (!dir.ok()) return dir.status();
  if (*dir == "faster") {
    e.direction = ExpectDirection::kFaster;
  } else if (*dir == "slower") {
    e.direction = ExpectDirection::kSlower;
  } else if (*dir == "neutral") {
    e.direction = ExpectDirection::kNeutral;
  } else {
    return ErrorAt(
        source_name, entry["direction"],
        absl::StrCat(what, ": unknown direction '", *dir, "' (expected faster, slower, neutral)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ParseBound(const YAML::Node& n, absl::string_view source_name,
                                  absl::string_view what) {
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || std::isnan(v) || v < 0) {
    return ErrorAt(source_name, n,
                   absl::StrCat(what, ": a speedup bound is a number >= 0 (or .inf)"));
  }
  return v;
}

// `speedup: {min: A, max: B}`, each optional, defaulted by direction; a band
// that cannot hold the direction (faster with min <= 1, ...) is refused.
absl::Status ParseBand(const YAML::Node& entry, absl::string_view source_name,
                       absl::string_view what, CatalogExpectation& e) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (e.direction) {
    case ExpectDirection::kFaster:
      e.min_speedup = kDefaultFasterMin, e.max_speedup = inf;
      break;
    case ExpectDirection::kSlower:
      e.min_speedup = 0, e.max_speedup = kDefaultSlowerMax;
      break;
    case ExpectDirection::kNeutral:
      e.min_speedup = kDefaultNeutralMin, e.max_speedup = kDefaultNeutralMax;
      break;
  }
  const YAML::Node band = entry["speedup"];
  if (band) {
    if (!band.IsMap()) {
      return ErrorAt(source_name, band, absl::StrCat(what, ": 'speedup' is a map {min, max}"));
    }
    for (const auto& kv : band) {
      const std::string k = kv.first.as<std::string>();
      if (k != "min" && k != "max") {
        return ErrorAt(source_name, kv.first,
                       absl::StrCat(what, ": unknown speedup field '", k, "' (expected min, max)"));
      }
      absl::StatusOr<double> v = ParseBound(kv.second, source_name, what);
      if (!v.ok()) return v.status();
      (k == "min" ? e.min_speedup : e.max_speedup) = *v;
    }
  }
  const YAML::Node at = band ? band : entry;
  if (e.min_speedup > e.max_speedup) {
    return ErrorAt(source_name, at, absl::StrCat(what, ": speedup min is above max"));
  }
  const bool holds = e.direction == ExpectDirection::kFaster ? e.min_speedup > 1
                     : e.direction == ExpectDirection::kSlower
                         ? e.max_speedup < 1
                         : e.min_speedup <= 1 && 1 <= e.max_speedup;
  if (!holds) {
    return ErrorAt(
        source_name, at,
        absl::StrCat(what, ": speedup band [", e.min_speedup, ", ", e.max_speedup,
                     "] contradicts direction '", ExpectDirectionName(e.direction),
                     "' (faster needs min > 1, slower max < 1, neutral min <= 1 <= max)"));
  }
  return absl::OkStatus();
}

absl::Status ParseWorkload(const YAML::Node& entry, absl::string_view source_name,
                           absl::string_view what, const ExpectValidator& validator,
                           CatalogExpectation& e) {
  absl::StatusOr<std::string> workload = RequiredText(entry, "workload", source_name, what);
  if (!workload.ok()) return workload.status();
  e.workload = *workload;
  if (const YAML::Node params = entry["params"]; params) {
    if (!params.IsMap()) {
      return ErrorAt(source_name, params,
                     absl::StrCat(what, ": 'params' is a map of workload parameters"));
    }
    for (const auto& kv : params) {
      if (!kv.second.IsScalar()) {
        return ErrorAt(source_name, kv.second,
                       absl::StrCat(what, ": params: expected a scalar value"));
      }
      e.params[kv.first.as<std::string>()] = kv.second.Scalar();
    }
  }
  if (validator) {
    if (absl::Status s = validator(e.workload, e.params); !s.ok()) {
      return ErrorAt(source_name, entry["workload"], absl::StrCat(what, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

constexpr const char* kExpectFields[] = {"platforms", "modes",     "workload",  "params",
                                         "metric",    "direction", "speedup",   "against",
                                         "claim",     "source",    "model_todo"};

absl::StatusOr<CatalogExpectation> ParseExpectation(const YAML::Node& entry,
                                                    absl::string_view source_name,
                                                    absl::string_view commit_id,
                                                    const ExpectValidator& validator) {
  const std::string what = absl::StrCat("commit '", commit_id, "': expect");
  if (!entry.IsMap())
    return ErrorAt(source_name, entry, absl::StrCat(what, ": each entry is a map"));
  for (const auto& kv : entry) {
    const std::string f = kv.first.as<std::string>();
    if (std::find(std::begin(kExpectFields), std::end(kExpectFields), f) ==
        std::end(kExpectFields)) {
      return ErrorAt(source_name, kv.first,
                     absl::StrCat(what, ": unknown field '", f, "' (expected ",
                                  absl::StrJoin(kExpectFields, ", "), ")"));
    }
  }
  CatalogExpectation e;
  e.line = entry.Mark().line + 1;
  absl::StatusOr<std::vector<std::string>> platforms =
      ParseNameList(entry, "platforms", source_name, what);
  if (!platforms.ok()) return platforms.status();
  e.platforms = *std::move(platforms);
  absl::StatusOr<std::vector<std::string>> modes = ParseNameList(entry, "modes", source_name, what);
  if (!modes.ok()) return modes.status();
  e.modes = *std::move(modes);
  if (absl::Status s = CheckPlatformsAndModes(e, entry, source_name, what); !s.ok()) return s;
  if (absl::Status s = ParseWorkload(entry, source_name, what, validator, e); !s.ok()) return s;
  if (absl::Status s = ParseMetricAndDirection(entry, source_name, what, e); !s.ok()) return s;
  if (absl::Status s = ParseBand(entry, source_name, what, e); !s.ok()) return s;
  for (auto [field, out] : {std::pair{"claim", &e.claim}, std::pair{"source", &e.source}}) {
    absl::StatusOr<std::string> text = RequiredText(entry, field, source_name, what);
    if (!text.ok()) return text.status();
    *out = *std::move(text);
  }
  for (auto [field, out] :
       {std::pair{"against", &e.against}, std::pair{"model_todo", &e.model_todo}}) {
    if (const YAML::Node n = entry[field]; n) {
      absl::StatusOr<std::string> text = RequiredText(entry, field, source_name, what);
      if (!text.ok()) return text.status();
      *out = *std::move(text);
    }
  }
  return e;
}

absl::StatusOr<std::vector<CatalogExpectation>> ParseExpectations(
    const YAML::Node& node, absl::string_view source_name, absl::string_view commit_id,
    const ExpectValidator& validator) {
  if (!node.IsSequence() || node.size() == 0) {
    return ErrorAt(source_name, node,
                   absl::StrCat("commit '", commit_id,
                                "': 'expect' must be a non-empty list of expectations"));
  }
  std::vector<CatalogExpectation> out;
  for (const YAML::Node& entry : node) {
    absl::StatusOr<CatalogExpectation> e =
        ParseExpectation(entry, source_name, commit_id, validator);
    if (!e.ok()) return e.status();
    out.push_back(*std::move(e));
  }
  return out;
}

// One entry of `commits`, checked field by field. yaml-cpp may throw; the
// caller turns that into a located error.
absl::StatusOr<CatalogCommit> ParseCommit(const YAML::Node& entry, absl::string_view source_name,
                                          const KeyValidator& validator,
                                          const ExpectValidator& expect_validator) {
  if (!entry.IsMap()) {
    return ErrorAt(source_name, entry, "each commit is a map with id, subject and set");
  }
  CatalogCommit commit;
  commit.source = std::string(source_name);
  commit.line = entry.Mark().line + 1;
  for (const auto& kv : entry) {
    std::string field = kv.first.as<std::string>();
    if (field != "id" && field != "subject" && field != "author" && field != "set" &&
        field != "expect" && field != "parents") {
      return ErrorAt(source_name, kv.first,
                     absl::StrCat("unknown field '", field,
                                  "' (expected id, subject, author, parents, set, expect)"));
    }
  }
  const YAML::Node id = entry["id"];
  if (!id || !id.IsScalar() || id.Scalar().empty()) {
    return ErrorAt(source_name, entry, "commit without 'id'");
  }
  commit.id = id.Scalar();
  if (absl::Status s = CheckIdText(commit.id); !s.ok()) {
    return ErrorAt(source_name, id, s.message());
  }
  const YAML::Node subject = entry["subject"];
  if (!subject || !subject.IsScalar() || subject.Scalar().empty()) {
    return ErrorAt(source_name, entry, absl::StrCat("commit '", commit.id, "' without 'subject'"));
  }
  commit.subject = subject.Scalar();
  if (const YAML::Node author = entry["author"]; author) {
    if (!author.IsScalar() || author.Scalar().empty()) {
      return ErrorAt(source_name, author,
                     absl::StrCat("commit '", commit.id, "': 'author' must be \"Name <email>\""));
    }
    commit.author = author.Scalar();
  }
  if (const YAML::Node parents = entry["parents"]; parents) {
    if (!parents.IsSequence() || parents.size() == 0) {
      return ErrorAt(source_name, parents,
                     absl::StrCat("commit '", commit.id,
                                  "': 'parents' must be a non-empty list of commit ids (leave it "
                                  "out for the previous entry)"));
    }
    for (const YAML::Node& p : parents) {
      if (!p.IsScalar() || p.Scalar().empty()) {
        return ErrorAt(source_name, p,
                       absl::StrCat("commit '", commit.id, "': a parent must be a commit id"));
      }
      commit.parents.push_back(p.Scalar());
    }
  }
  if (const YAML::Node expect = entry["expect"]; expect) {
    absl::StatusOr<std::vector<CatalogExpectation>> e =
        ParseExpectations(expect, source_name, commit.id, expect_validator);
    if (!e.ok()) return e.status();
    commit.expect = *std::move(e);
  }
  if (const YAML::Node set = entry["set"]; set) {
    if (!set.IsMap()) {
      return ErrorAt(source_name, set,
                     absl::StrCat("commit '", commit.id, "': 'set' must be a map of model keys"));
    }
    for (const auto& kv : set) {
      std::string key = kv.first.as<std::string>();
      if (!kv.second.IsScalar()) {
        return ErrorAt(
            source_name, kv.second,
            absl::StrCat("commit '", commit.id, "': bad value for '", key, "': expected a scalar"));
      }
      std::string value = kv.second.Scalar();
      if (validator) {
        if (absl::Status s = validator(key, value); !s.ok()) {
          return ErrorAt(source_name, kv.first,
                         absl::StrCat("commit '", commit.id, "': ", s.message()));
        }
      }
      if (!commit.set.emplace(key, value).second) {
        return ErrorAt(source_name, kv.first,
                       absl::StrCat("commit '", commit.id, "': key '", key, "' set twice"));
      }
    }
  }
  return commit;
}

}  // namespace

const char* ExpectMetricName(ExpectMetric m) {
  switch (m) {
    case ExpectMetric::kThroughput:
      return "throughput";
    case ExpectMetric::kMapNs:
      return "map_ns";
    case ExpectMetric::kUnmapNs:
      return "unmap_ns";
  }
  return "?";
}

const char* ExpectDirectionName(ExpectDirection d) {
  switch (d) {
    case ExpectDirection::kFaster:
      return "faster";
    case ExpectDirection::kSlower:
      return "slower";
    case ExpectDirection::kNeutral:
      return "neutral";
  }
  return "?";
}

const CatalogCommit* Catalog::FindSame(const std::string& id) const {
  if (auto it = by_id_.find(id); it != by_id_.end()) return &commits_[it->second];
  if (!IsHex(id) || id.size() < kMinPrefix) return nullptr;
  const std::string lower = absl::AsciiStrToLower(id);
  // An indexed id that `id` abbreviates sorts at or right after it.
  if (auto it = by_hex_.lower_bound(lower);
      it != by_hex_.end() && absl::StartsWith(it->first, lower)) {
    return &commits_[it->second];
  }
  // An indexed id that abbreviates `id`: one of its prefixes.
  for (size_t n = kMinPrefix; n < lower.size(); ++n) {
    if (auto it = by_hex_.find(lower.substr(0, n)); it != by_hex_.end()) {
      return &commits_[it->second];
    }
  }
  return nullptr;
}

absl::Status Catalog::Append(CatalogCommit commit) {
  if (const CatalogCommit* other = FindSame(commit.id); other != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat(
        Where(commit.source, commit.line), ": duplicate commit id '", commit.id, "' (already at ",
        Where(other->source, other->line), " as '", other->id, "')"));
  }
  by_id_.emplace(commit.id, commits_.size());
  if (IsHex(commit.id) && commit.id.size() >= kMinPrefix) {
    by_hex_.emplace(absl::AsciiStrToLower(commit.id), commits_.size());
  }
  commits_.push_back(std::move(commit));
  return absl::OkStatus();
}

absl::StatusOr<Catalog> Catalog::LoadFile(const std::string& path, const KeyValidator& validator,
                                          const ExpectValidator& expect_validator) {
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot open catalog file '", path, "'"));
  }
  return LoadString(*text, path, validator, expect_validator);
}

absl::StatusOr<Catalog> Catalog::LoadString(absl::string_view yaml, absl::string_view source_name,
                                            const KeyValidator& validator,
                                            const ExpectValidator& expect_validator) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(source_name, e.mark.line + 1), ": YAML syntax error: ", e.msg));
  }
  Catalog catalog;
  try {
    if (!root.IsMap()) {
      return ErrorAt(source_name, root, "a catalog is a map with keys 'catalog' and 'commits'");
    }
    for (const auto& kv : root) {
      std::string field = kv.first.as<std::string>();
      if (field != "catalog" && field != "commits" && field != "description") {
        return ErrorAt(
            source_name, kv.first,
            absl::StrCat("unknown field '", field, "' (expected catalog, description, commits)"));
      }
    }
    if (root["catalog"]) {
      if (!root["catalog"].IsScalar()) {
        return ErrorAt(source_name, root["catalog"], "'catalog' must be a name");
      }
      catalog.name_ = root["catalog"].as<std::string>();
    }
    const YAML::Node commits = root["commits"];
    if (!commits) {
      return ErrorAt(source_name, root, "missing 'commits' list");
    }
    if (!commits.IsSequence()) {
      return ErrorAt(source_name, commits, "'commits' must be a list");
    }
    // Every entry is checked even after a bad one, so that one load names every
    // problem of a hand-written catalog (up to kMaxErrors).
    std::vector<absl::Status> errors;
    for (const YAML::Node& entry : commits) {
      absl::StatusOr<CatalogCommit> commit;
      try {
        commit = ParseCommit(entry, source_name, validator, expect_validator);
      } catch (const YAML::Exception& e) {
        commit = absl::InvalidArgumentError(
            absl::StrCat(Where(source_name, e.mark.line + 1), ": ", e.msg));
      }
      absl::Status s = commit.ok() ? catalog.Append(*std::move(commit)) : commit.status();
      if (!s.ok()) errors.push_back(std::move(s));
      if (errors.size() >= kMaxErrors) break;
    }
    if (!errors.empty()) return JoinErrors(errors);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(source_name, e.mark.line + 1), ": ", e.msg));
  }
  if (catalog.commits_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": catalog has no commits"));
  }
  if (absl::Status s = catalog.CheckBaselines(); !s.ok()) return s;
  if (absl::Status s = catalog.CheckParents(); !s.ok()) return s;
  return catalog;
}

absl::Status Catalog::CheckParents() {
  std::vector<absl::Status> errors;
  bool any = false;
  std::vector<std::vector<size_t>> pos(commits_.size());
  for (size_t i = 0; i < commits_.size() && errors.size() < kMaxErrors; ++i) {
    CatalogCommit& c = commits_[i];
    if (c.parents.empty()) {
      if (i > 0) pos[i].push_back(i - 1);
      continue;
    }
    any = true;
    for (std::string& p : c.parents) {
      absl::StatusOr<size_t> at = Find(p);
      absl::Status bad;
      if (at.ok() && *at >= i) {
        bad = absl::InvalidArgumentError(
            absl::StrCat("parent '", p, "' does not come before the commit (parents first)"));
      } else if (at.ok()) {
        p = commits_[*at].id;
        pos[i].push_back(*at);
      } else if (!absl::IsNotFound(at.status()) || !IsHex(p) || p.size() < kMinPrefix) {
        bad = absl::InvalidArgumentError(absl::StrCat(
            "parent '", p, "' is neither an earlier entry nor a commit id outside the catalog (",
            kMinPrefix, "+ hex digits)"));
      }
      if (!bad.ok()) {
        errors.push_back(absl::InvalidArgumentError(
            absl::StrCat(Where(c.source, c.line), ": commit '", c.id, "': ", bad.message())));
      }
    }
  }
  if (!errors.empty()) return JoinErrors(errors);
  if (any) parent_pos_ = std::move(pos);
  return absl::OkStatus();
}

absl::Status Catalog::CheckBaselines() const {
  std::vector<absl::Status> errors;
  for (size_t i = 0; i < commits_.size() && errors.size() < kMaxErrors; ++i) {
    const CatalogCommit& c = commits_[i];
    for (const CatalogExpectation& e : c.expect) {
      absl::Status bad;
      if (e.against.empty() && i == 0) {
        bad = absl::InvalidArgumentError("the first commit has no previous entry: give 'against'");
      } else if (!e.against.empty()) {
        absl::StatusOr<size_t> base = Find(e.against);
        if (!base.ok()) {
          bad = base.status();
        } else if (*base >= i) {
          bad = absl::InvalidArgumentError(
              absl::StrCat("'against: ", e.against, "' does not come before the commit"));
        }
      }
      if (!bad.ok()) {
        errors.push_back(absl::InvalidArgumentError(absl::StrCat(
            Where(c.source, e.line), ": commit '", c.id, "': expect: ", bad.message())));
      }
    }
  }
  return errors.empty() ? absl::OkStatus() : JoinErrors(errors);
}

absl::StatusOr<size_t> Catalog::Find(absl::string_view id) const {
  for (size_t i = 0; i < commits_.size(); ++i) {
    if (commits_[i].id == id) return i;
  }
  if (!IsHex(id)) {
    return absl::NotFoundError(absl::StrCat("unknown commit '", id, "' in catalog '", name_, "'"));
  }
  if (id.size() < kMinPrefix) {
    return absl::InvalidArgumentError(absl::StrCat(
        "commit id '", id, "' is too short: give at least ", kMinPrefix, " hex digits"));
  }
  std::vector<size_t> hits;
  for (size_t i = 0; i < commits_.size(); ++i) {
    if (SameCommit(commits_[i].id, id)) hits.push_back(i);
  }
  if (hits.empty()) {
    return absl::NotFoundError(absl::StrCat("unknown commit '", id, "' in catalog '", name_, "'"));
  }
  if (hits.size() > 1) {
    std::vector<std::string> names;
    for (size_t i : hits) names.push_back(commits_[i].id);
    return absl::InvalidArgumentError(
        absl::StrCat("commit id '", id, "' is ambiguous: ", absl::StrJoin(names, ", ")));
  }
  return hits.front();
}

std::map<std::string, std::string> Catalog::SettingsAt(size_t index) const {
  FARM_DCHECK(index < commits_.size(), "SettingsAt() past the last commit");
  std::map<std::string, std::string> out;
  std::vector<bool> mine(index + 1, parent_pos_.empty());
  if (!parent_pos_.empty()) {
    // Ancestors by their parents; a commit past parent_pos_ (imported
    // later) has the previous entry as its parent.
    std::vector<size_t> todo = {index};
    mine[index] = true;
    while (!todo.empty()) {
      const size_t c = todo.back();
      todo.pop_back();
      const std::vector<size_t> prev = c > 0 ? std::vector<size_t>{c - 1} : std::vector<size_t>{};
      for (size_t p : c < parent_pos_.size() ? parent_pos_[c] : prev) {
        if (!mine[p]) {
          mine[p] = true;
          todo.push_back(p);
        }
      }
    }
  }
  for (size_t i = 0; i <= index && i < commits_.size(); ++i) {
    if (!mine[i]) continue;
    for (const auto& [k, v] : commits_[i].set) out[k] = v;
  }
  return out;
}

absl::StatusOr<ResolvedCommit> Catalog::Resolve(absl::string_view id) const {
  absl::StatusOr<size_t> index = Find(id);
  if (!index.ok()) return index.status();
  ResolvedCommit r;
  r.index = *index;
  r.id = commits_[*index].id;
  r.subject = commits_[*index].subject;
  r.settings = SettingsAt(*index);
  return r;
}

absl::StatusOr<std::vector<size_t>> Catalog::Range(absl::string_view spec) const {
  absl::string_view from = spec, to = spec;
  if (size_t dots = spec.find(".."); dots != absl::string_view::npos) {
    from = spec.substr(0, dots);
    to = spec.substr(dots + 2);
    if (from.empty() || to.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("range '", spec, "': expected FROM..TO with both ends named"));
    }
  }
  absl::StatusOr<size_t> a = Find(from);
  if (!a.ok())
    return absl::Status(a.status().code(),
                        absl::StrCat("range '", spec, "': ", a.status().message()));
  absl::StatusOr<size_t> b = Find(to);
  if (!b.ok())
    return absl::Status(b.status().code(),
                        absl::StrCat("range '", spec, "': ", b.status().message()));
  if (*b < *a) {
    return absl::InvalidArgumentError(
        absl::StrCat("range '", spec, "': '", to, "' comes before '", from, "' in the catalog"));
  }
  std::vector<size_t> out;
  for (size_t i = *a; i <= *b; ++i) out.push_back(i);
  return out;
}

absl::Status Catalog::ImportCommitList(absl::string_view text, absl::string_view source_name,
                                       CommitListOrder order) {
  std::vector<CatalogCommit> incoming;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line.front() == '#') continue;
    size_t cut = line.find('\t');
    if (cut == absl::string_view::npos) cut = line.find(' ');
    if (cut == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(source_name, line_no), ": expected '<commit id><TAB><subject>', got '", line, "'"));
    }
    CatalogCommit c;
    c.id = std::string(line.substr(0, cut));
    c.subject = std::string(absl::StripAsciiWhitespace(line.substr(cut + 1)));
    c.source = std::string(source_name);
    c.line = line_no;
    if (!IsHex(c.id) || c.id.size() < kMinPrefix) {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(source_name, line_no), ": '", c.id, "' is not a commit id (7 or more hex digits)"));
    }
    if (c.subject.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(source_name, line_no), ": commit '", c.id, "' without a subject"));
    }
    incoming.push_back(std::move(c));
  }
  if (order == CommitListOrder::kNewestFirst) std::reverse(incoming.begin(), incoming.end());
  // Validate the whole list before touching the catalog, so a bad import
  // leaves it as it was.
  Catalog trial = *this;
  for (CatalogCommit& c : incoming) {
    if (trial.FindSame(c.id) != nullptr) continue;
    if (absl::Status s = trial.Append(std::move(c)); !s.ok()) return s;
  }
  *this = std::move(trial);
  return absl::OkStatus();
}

namespace {

std::string ExecutableDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return exe.parent_path().string();
}

}  // namespace

absl::StatusOr<std::string> DefaultCatalogPath() {
  std::vector<std::string> tried;
  if (const char* env = std::getenv("FARM_EMU_CATALOG"); env != nullptr && *env != '\0') {
    // An explicit choice is never second-guessed: a wrong path is an error.
    if (std::filesystem::exists(env)) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("FARM_EMU_CATALOG names '", env, "', which does not exist"));
  }
  std::vector<std::string> candidates;
  if (std::string dir = ExecutableDir(); !dir.empty()) {
    candidates.push_back(dir + "/catalogs/linux-iommu.yaml");
    candidates.push_back(dir + "/../share/iommu-farm/catalogs/linux-iommu.yaml");
  }
  if (absl::string_view src = FARM_EMU_SOURCE_CATALOG_DIR; !src.empty()) {
    candidates.push_back(absl::StrCat(src, "/linux-iommu.yaml"));
  }
  for (const std::string& c : candidates) {
    if (std::filesystem::exists(c)) return c;
    tried.push_back(c);
  }
  return absl::NotFoundError(
      absl::StrCat("no commit catalog found (set FARM_EMU_CATALOG or pass "
                   "--catalog); tried: ",
                   absl::StrJoin(tried, ", ")));
}

absl::StatusOr<ResolvedCommit> ResolveKernel(absl::string_view kernel_id,
                                             const std::string& catalog_path,
                                             const KeyValidator& validator) {
  std::string path = catalog_path;
  if (path.empty()) {
    absl::StatusOr<std::string> def = DefaultCatalogPath();
    if (!def.ok()) return def.status();
    path = *def;
  }
  absl::StatusOr<Catalog> catalog = Catalog::LoadFile(path, validator);
  if (!catalog.ok()) return catalog.status();
  absl::StatusOr<ResolvedCommit> r = catalog->Resolve(kernel_id);
  if (!r.ok()) {
    return absl::Status(r.status().code(),
                        absl::StrCat("--kernel: ", r.status().message(), " (catalog ", path, ")"));
  }
  return r;
}

}  // namespace farm::emu
