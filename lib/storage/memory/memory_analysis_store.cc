#include "lib/storage/memory/memory_analysis_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace farm::storage {

using Tables = MemoryDatabase::Tables;

namespace {

// A regression's culprits are those of its bisect (as PgAnalysisStore reads
// them from bisect_culprits), whatever the stored row holds.
pb::Regression WithCulprits(const Tables& t, const pb::Regression& stored) {
  pb::Regression g = stored;
  g.clear_culprits();
  auto it = t.bisects.find(g.bisect_id());
  if (g.bisect_id() != 0 && it != t.bisects.end()) {
    *g.mutable_culprits() = it->second.culprits();
  }
  return g;
}

}  // namespace

absl::StatusOr<std::vector<pb::Regression>> MemoryAnalysisStore::ListRegressions(
    const pb::ListRegressionsRequest& req) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::Regression>> {
    std::vector<pb::Regression> out;
    const int64_t after = RegressionPageAfter(req);
    for (auto it = t.regressions.upper_bound(after); it != t.regressions.end();
         ++it) {  // ORDER BY id
      if (req.page_size() > 0 && static_cast<int>(out.size()) >= req.page_size()) break;
      const pb::Regression& g = it->second.regression;
      const bool closed = g.state() == pb::REGRESSION_STATE_FIXED ||
                          g.state() == pb::REGRESSION_STATE_FALSE_POSITIVE ||
                          g.state() == pb::REGRESSION_STATE_REJECTED ||
                          g.state() == pb::REGRESSION_STATE_IGNORED;
      if (closed && !req.include_closed()) continue;
      if (g.direction() == pb::CHANGE_DIRECTION_IMPROVEMENT && !req.include_improvements()) {
        continue;
      }
      if (req.matrix_id() != 0 && g.matrix_id() != req.matrix_id()) continue;
      if (req.group_id() != 0 && g.group_id() != req.group_id()) continue;
      out.push_back(WithCulprits(t, g));
    }
    return out;
  });
}

absl::StatusOr<pb::Regression> MemoryAnalysisStore::GetRegression(int64_t id) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<pb::Regression> {
    auto it = t.regressions.find(id);
    if (it == t.regressions.end()) {
      return absl::NotFoundError(absl::StrCat("regression ", id, " not found"));
    }
    return WithCulprits(t, it->second.regression);
  });
}

absl::StatusOr<pb::Bisect> MemoryAnalysisStore::GetBisect(int64_t bisect_id,
                                                          int64_t regression_id) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<pb::Bisect> {
    const pb::Bisect* found = nullptr;
    if (bisect_id != 0) {
      auto it = t.bisects.find(bisect_id);
      if (it != t.bisects.end()) found = &it->second;
    } else {
      for (const auto& [id, b] : t.bisects) {  // the latest: highest id
        if (b.regression_id() == regression_id) found = &b;
      }
    }
    if (found == nullptr) {
      return absl::NotFoundError(bisect_id != 0
                                     ? absl::StrCat("bisect ", bisect_id, " not found")
                                     : absl::StrCat("no bisect for regression ", regression_id));
    }
    pb::Bisect b = *found;
    std::sort(b.mutable_steps()->begin(), b.mutable_steps()->end(),
              [](const pb::BisectStep& x, const pb::BisectStep& y) { return x.step() < y.step(); });
    return b;
  });
}

absl::StatusOr<pb::Regression> MemoryAnalysisStore::UpdateRegression(int64_t id,
                                                                     pb::RegressionState state,
                                                                     const std::string& note) {
  return db_->Write([&](Tables& t, MemoryDatabase::Changes&) -> absl::StatusOr<pb::Regression> {
    auto it = t.regressions.find(id);
    if (it == t.regressions.end()) {
      return absl::NotFoundError(absl::StrCat("regression ", id, " not found"));
    }
    pb::Regression& g = it->second.regression;
    if (state != pb::REGRESSION_STATE_UNSPECIFIED && state != g.state()) {
      g.set_state(state);
      g.clear_fix_check();
    }
    if (!note.empty()) g.set_note(note);
    it->second.updated_at = db_->Now();
    return WithCulprits(t, g);
  });
}

}  // namespace farm::storage
