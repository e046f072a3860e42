#include "cli/measured_costs.h"

#include <cmath>

#include <yaml-cpp/yaml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/compare.h"
#include "proto/names.h"

namespace farm::cli {

namespace pb = ::iommufarm::v1;

namespace {

struct Sums {
  double map = 0, unmap = 0;
  int maps = 0, unmaps = 0;
};

}  // namespace

absl::StatusOr<Measurement> MeasureCommits(const std::vector<pb::Result>& results,
                                           pb::IommuMode mode) {
  Measurement out;
  std::map<std::string, Sums> sums;
  for (const pb::Result& r : results) {
    if (r.job().mode() != mode) continue;
    const uint32_t shift = r.host().guest().icount_shift();
    if (shift == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", r.job().id(), " (", r.job().commit_id(),
                       ") was not instruction-timed (accel ", r.host().guest().accel(),
                       "): its latencies are not instruction counts; run the matrix on a "
                       "--vm-accel tcg-icount agent"));
    }
    if (out.icount_shift != 0 && shift != out.icount_shift) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job ", r.job().id(), " ran at icount shift ", shift, ", others at ", out.icount_shift));
    }
    out.icount_shift = shift;
    Sums& s = sums[r.job().commit_id()];
    for (const pb::Sample& sample : r.samples()) {
      if (sample.metric() == "map_latency_mean") {
        s.map += sample.value();
        ++s.maps;
      } else if (sample.metric() == "unmap_latency_mean") {
        s.unmap += sample.value();
        ++s.unmaps;
      }
    }
  }
  for (const auto& [commit, s] : sums) {
    if (s.maps == 0 || s.unmaps == 0) continue;
    out.commits[commit] =
        MeasuredCommit{s.map / s.maps, s.unmap / s.unmaps, std::min(s.maps, s.unmaps)};
  }
  if (out.commits.empty()) {
    return absl::NotFoundError(absl::StrCat("no ", proto::ModeName(mode),
                                            " run with map_latency_mean and unmap_latency_mean "
                                            "(a dma-map-bench matrix)"));
  }
  return out;
}

absl::StatusOr<std::string> MeasuredCatalogYaml(const pb::Catalog& source, const std::string& name,
                                                const Measurement& m,
                                                const std::string& reference) {
  const MeasuredCommit* ref = nullptr;
  for (const auto& [id, c] : m.commits) {
    if (CommitIs(id, reference)) ref = &c;
  }
  if (ref == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reference ", reference, " was not measured in this matrix"));
  }
  const double ns_per_insn = std::ldexp(1.0, static_cast<int>(m.icount_shift));
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "catalog" << YAML::Value << name;
  out << YAML::Key << "commits" << YAML::Value << YAML::BeginSeq;
  for (const pb::CatalogCommit& c : source.commits()) {
    out << YAML::BeginMap << YAML::Key << "id" << YAML::Value << c.id();
    out << YAML::Key << "subject" << YAML::Value << YAML::DoubleQuoted << c.subject();
    std::map<std::string, std::string> set(c.set().begin(), c.set().end());
    if (auto it = m.commits.find(c.id()); it != m.commits.end()) {
      set["sw.map_delta_insns"] =
          absl::StrCat(std::llround((it->second.map_ns - ref->map_ns) / ns_per_insn));
      set["sw.unmap_delta_insns"] =
          absl::StrCat(std::llround((it->second.unmap_ns - ref->unmap_ns) / ns_per_insn));
    }
    if (!set.empty()) {
      out << YAML::Key << "set" << YAML::Value << YAML::Flow << YAML::BeginMap;
      for (const auto& [k, v] : set) out << YAML::Key << k << YAML::Value << v;
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string FormatMeasurement(const pb::Catalog& source, const Measurement& m) {
  const double ns_per_insn = std::ldexp(1.0, static_cast<int>(m.icount_shift));
  std::string out = "commit        runs  map insns  unmap insns  subject\n";
  for (const pb::CatalogCommit& c : source.commits()) {
    auto it = m.commits.find(c.id());
    if (it == m.commits.end()) continue;
    absl::StrAppend(&out, absl::StrFormat("%-12s  %4d  %9.0f  %11.0f  %s\n", c.id().substr(0, 12),
                                          it->second.runs, it->second.map_ns / ns_per_insn,
                                          it->second.unmap_ns / ns_per_insn, c.subject()));
  }
  return out;
}

}  // namespace farm::cli
