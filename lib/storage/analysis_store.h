// AnalysisStore: the analyzer's regressions and bisects, read and triaged
// through the scheduler (the analyzer writes them: services/analyzer).
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_ANALYSIS_STORE_H_
#define LIB_STORAGE_ANALYSIS_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

class AnalysisStore {
 public:
  virtual ~AnalysisStore() = default;
  virtual absl::StatusOr<std::vector<pb::Regression>> ListRegressions(
      const pb::ListRegressionsRequest& req) = 0;
  virtual absl::StatusOr<pb::Regression> GetRegression(int64_t id) = 0;
  // By bisect id, or by regression id (its latest bisect) when bisect_id == 0.
  virtual absl::StatusOr<pb::Bisect> GetBisect(int64_t bisect_id, int64_t regression_id) = 0;
  virtual absl::StatusOr<pb::Regression> UpdateRegression(int64_t id, pb::RegressionState state,
                                                          const std::string& note) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_ANALYSIS_STORE_H_
