#include "services/analyzer/top_up.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "services/analyzer/rerun.h"

namespace farm::analyzer {

namespace pb = ::iommufarm::v1;

std::vector<TopUpMatrix> GroupTopUps(const std::vector<TopUpRequest>& requests) {
  using Cell = std::tuple<std::string, std::string, std::string, std::string, bool>;
  std::map<Cell, std::map<int, std::string>> commits;  // by catalog index
  std::map<Cell, TopUpMatrix> out;
  for (const TopUpRequest& r : requests) {
    const SeriesKey& k = r.at.key;
    const Cell cell{k.platform, k.workload, k.params, k.mode, k.overhead};
    TopUpMatrix& t = out[cell];
    t.platform = k.platform;
    t.workload = k.workload;
    t.params = k.params;
    t.mode = k.mode;
    t.overhead = k.overhead;
    // The fewest of its requests': none is taken past its cap.
    t.repeats = t.repeats == 0 ? r.repeats : std::min(t.repeats, r.repeats);
    t.splits.push_back(absl::StrCat(k.metric, " ", r.at.last_good, "..", r.at.first_bad));
    for (size_t i = 0; i < r.commit_indices.size(); ++i) {
      commits[cell][r.commit_indices[i]] = r.commit_ids[i];
    }
  }
  std::vector<TopUpMatrix> v;
  for (auto& [cell, t] : out) {
    for (const auto& [index, id] : commits[cell]) t.commits.push_back(id);
    v.push_back(std::move(t));
  }
  return v;
}

pb::MatrixSpec TopUpSpec(const TopUpMatrix& t, SeriesSpec cell, const pb::MatrixAnalysis& analysis,
                         int64_t of, int index, int priority) {
  cell.mode = t.mode;
  cell.overhead = t.overhead;
  // Below 2^31, so every reader of the matrix's YAML takes it as a plain
  // integer; never the bulk's own seed for these commits.
  const uint64_t seed =
      (static_cast<uint64_t>(of) * 48271u + static_cast<uint64_t>(index + 1) * 16807u) %
          2000000000u +
      1;
  pb::MatrixSpec m = RerunSpec(cell, absl::StrCat("analyzer-t", of, "-top-up", index + 1),
                               t.commits, t.repeats, pb::JOB_KIND_BULK, seed, priority);
  *m.mutable_analysis() = analysis;
  return m;
}

}  // namespace farm::analyzer
